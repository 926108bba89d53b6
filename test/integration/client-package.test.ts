import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { GRAPH_AGENT, writeGraphModels } from '../helpers/graphs.js';
import { PACKAGES, installOffline, pack, treeBytes } from '../helpers/packages.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * What the application does with the installed client, as a new user's would: import it, connect,
 * deploy and run a model, a pipeline, a class actor's method and its stream. It prints what it got,
 * with how long the import took (wall and CPU), as one JSON line.
 */
const APP = `
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const { connect, model, pipeline, tensor, TroupeError } = await import('@troupe/client');
const importMs = performance.now() - t0;
const { user, system } = process.cpuUsage(cpu0);
const x = tensor('float32', [2, 64], Float32Array.from(JSON.parse(process.argv[3])));
const cluster = await connect(process.argv[2]);
await cluster.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.1, threads: 1 });
const { logits } = await cluster.run('mlp', { x });
await cluster.deploy(pipeline('chain', [model('link21', { path: 'link21.onnx', cpus: 0.1, threads: 1 }), model('member11', { path: 'member11.onnx', cpus: 0.1, threads: 1 })]));
const chain = await cluster.run('chain', { x });
const counter = await cluster.actor({ name: 'counter', module: 'examples/actors/counter.js', export: 'Counter', args: [10], cpus: 0.1 });
const total = await counter.call('add', 5);
const counted = [];
for await (const n of counter.stream('count', 3)) counted.push(n);
const missing = await cluster.run('nowhere', { x }).then(() => undefined, (err) => ({ troupe: err instanceof TroupeError, code: err.code }));
console.log(JSON.stringify({ importMs, importCpuMs: (user + system) / 1000, logits: Array.from(logits.data), chain: Array.from(chain.logits.data), total, counted, missing, sharedMemory: cluster.sharedMemory.off }));
await cluster.close();
`;

/**
 * What the application's node_modules may weigh: the client (0.56 MB) and its dependencies, of
 * which zod (6.3 MB: its TypeScript sources, three builds and their types) and msgpackr (2.1 MB)
 * are nearly all; 9.3 MB measured. Bounded so that a server dependency joining the client's
 * closure fails here (onnxruntime-node alone is over 100 MB, fastify with its own over 4 MB).
 */
const CLIENT_INSTALL_BOUND = 12_000_000;

/** Runs the application's script in `cwd` and resolves with what it printed, parsed. */
function runApp(cwd: string, url: string, x: Float32Array): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['app.mjs', url, JSON.stringify(Array.from(x))], {
      cwd,
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`the application exited ${code}:\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>);
    });
  });
}

describe(
  '@troupe/client: packed, installed offline without install scripts into a new application, it serves a real cluster',
  { timeout: 300_000 },
  () => {
    let work: string;
    let cluster: TestCluster;

    before(async () => {
      work = await mkdtemp(join(tmpdir(), 'troupe-client-package-'));
      cluster = await startCluster({ agents: [GRAPH_AGENT] });
      await writeGraphModels(cluster.modelDir);
    });
    after(async () => {
      await cluster?.stop();
      if (work) await rm(work, { recursive: true, force: true });
    });

    test('installs from its tarball and npm cache alone, stays small, and runs a model, a graph, an actor call and a stream', async () => {
      const client = PACKAGES.find((p) => p.name === '@troupe/client')!;
      const app = join(work, 'app');
      const logs = join(work, 'npm-logs');
      const packed = await pack(client.dir, logs, work);
      await mkdir(app);
      await rename(join(work, packed.filename), join(app, packed.filename));
      await installOffline(app, packed.filename, logs);

      const bytes = await treeBytes(join(app, 'node_modules'));
      // What it installed, by name: the client and its four dependencies, and msgpackr's optional
      // native decoder where npm found one for this platform (msgpackr runs without it).
      const installed = (await readdir(join(app, 'node_modules'), { withFileTypes: true }))
        .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
        .map((entry) => entry.name);
      const OPTIONAL = ['@msgpackr-extract', 'msgpackr-extract', 'node-gyp-build-optional-packages', 'detect-libc'];
      assert.deepEqual(installed.filter((name) => !OPTIONAL.includes(name)).sort(), ['@troupe', 'msgpackr', 'nanoid', 'ws', 'zod']);
      await writeFile(join(app, 'app.mjs'), APP);
      const x = seededFloats(2 * 64, 5);
      const got = await runApp(app, cluster.url, x);
      // The figures the issue asks for, printed (a time is not asserted in a test; see docs/sdk.md).
      console.log(
        `@troupe/client: node_modules ${(bytes / 1e6).toFixed(2)} MB installed; import ${(got.importMs as number).toFixed(1)} ms wall, ${(got.importCpuMs as number).toFixed(1)} ms CPU`,
      );

      const input = tensor('float32', [2, 64], x);
      const mlp = await runInProcess(join(cluster.modelDir, 'mlp.onnx'), { x: input });
      const link = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x: input });
      const member = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x: link.logits! });
      assert.deepEqual(got.logits, Array.from(mlp.logits!.data as Float32Array));
      assert.deepEqual(got.chain, Array.from(member.logits!.data as Float32Array));
      assert.equal(got.total, 15);
      assert.deepEqual(got.counted, [0, 1, 2]);
      assert.deepEqual(got.missing, { troupe: true, code: 'TROUPE_ERR_UNKNOWN_DEPLOYMENT' });
      // Without the server package beside it the client has no shared-memory addon, and says why.
      assert.match(got.sharedMemory as string, /no server package \('troupe'\) is installed beside this client/);
      // Everything the application installed: the client and its four dependencies, no model
      // runtime, web server or gRPC (those are what made 'troupe' 392 MB).
      assert.ok(bytes < CLIENT_INSTALL_BOUND, `node_modules is ${bytes} bytes, over ${CLIENT_INSTALL_BOUND}`);
    });
  },
);
