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
import { PACKAGES, importTimes, installOffline, pack, treeBytes } from '../helpers/packages.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * What the application does with the installed client, as a new user's would: import it, connect,
 * deploy and run a model, a pipeline, a class actor's method and its stream. It prints what it got
 * as one JSON line.
 */
const APP = `
const { connect, model, pipeline, tensor, TroupeError } = await import('@troupe/client');
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
console.log(JSON.stringify({ logits: Array.from(logits.data), chain: Array.from(chain.logits.data), total, counted, missing, sharedMemory: cluster.sharedMemory.off }));
await cluster.close();
`;

/**
 * What the application's node_modules may weigh, as the issue asks: the client (one bundled
 * module and its declarations, 0.5 MB) and its one dependency, ws (0.2 MB): zod, msgpackr
 * and nanoid are inlined, only the parts the SDK uses. 0.7 MB measured.
 */
const CLIENT_INSTALL_BOUND = 5_000_000;

/**
 * What importing the client may take, as the issue asks: CPU time (process.cpuUsage, all the
 * process's threads) of `await import('@troupe/client')` in a new node process, the least of
 * IMPORT_RUNS such processes, so that a busy machine's one slow start does not decide it (CPU
 * rather than wall time: time spent waiting for a core is not the import's). 25 to 35 ms measured
 * on a 2-core machine shared with other work.
 */
const CLIENT_IMPORT_BOUND_MS = 50;
const IMPORT_RUNS = 5;

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
      // What it installed, by name: the client and ws, nothing else (msgpackr is inlined without
      // its optional native decoder, msgpackr-extract, which the client never requires).
      const installed = (await readdir(join(app, 'node_modules'), { withFileTypes: true }))
        .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
        .map((entry) => entry.name);
      assert.deepEqual(installed.sort(), ['@troupe', 'ws']);
      await writeFile(join(app, 'app.mjs'), APP);
      const x = seededFloats(2 * 64, 5);
      const got = await runApp(app, cluster.url, x);
      const times = await importTimes(app, '@troupe/client', IMPORT_RUNS);
      const cpu = Math.min(...times.map((t) => t.cpu));
      const wall = Math.min(...times.map((t) => t.wall));
      // The figures the issue asks for, printed, then held to its bounds below.
      console.log(
        `@troupe/client: node_modules ${(bytes / 1e6).toFixed(2)} MB installed; import ${cpu.toFixed(1)} ms CPU, ${wall.toFixed(1)} ms wall (the least of ${IMPORT_RUNS} new processes)`,
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
      // Everything the application installed: the client and its one dependency, no model
      // runtime, web server or gRPC (those are what made 'troupe' 392 MB), no zod (inlined).
      assert.ok(bytes < CLIENT_INSTALL_BOUND, `node_modules is ${bytes} bytes, over ${CLIENT_INSTALL_BOUND}`);
      assert.ok(
        cpu < CLIENT_IMPORT_BOUND_MS,
        `importing @troupe/client took ${cpu.toFixed(1)} ms CPU at best over ${IMPORT_RUNS} processes (${times.map((t) => t.cpu.toFixed(1)).join(', ')}), over ${CLIENT_IMPORT_BOUND_MS}`,
      );
    });
  },
);
