// Scale-to-zero cold starts: `npm run bench:cold-start` (after a build). For the MLP and the
// MobileNet-shaped CNN, the time from a call to a deployment at zero replicas to its answer,
// beside the floor: a fresh node process that loads onnxruntime-node, creates the session and
// runs once (spawn to answer), measured in the same run. REPEAT=N measurements each (default 5).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connect, tensor } from '../runtime/internal.js';
import type { ActorView, Cluster } from '../runtime/internal.js';
import { startCluster, waitFor } from '../test/helpers/cluster.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median } from './lib/report.js';

const REPEAT = Number(process.env.REPEAT ?? 5);

interface Case {
  model: 'mlp' | 'mobilenet';
  input: string;
  shape: number[];
}
const CASES: Case[] = [
  { model: 'mlp', input: 'x', shape: [1, 64] },
  { model: 'mobilenet', input: 'image', shape: [1, 3, 224, 224] },
];

async function actors(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

/** Spawn of a fresh process to its first answer, as the process itself measures it. */
function floorOnce(path: string, c: Case): Promise<number> {
  const child = fileURLToPath(new URL('./lib/cold-floor-child.js', import.meta.url));
  const started = performance.timeOrigin + performance.now();
  const proc = fork(child, [path, c.input, JSON.stringify(c.shape)], { stdio: 'ignore' });
  return new Promise((resolve, reject) => {
    proc.once('message', (m: { ms: number }) => resolve(m.ms - started));
    proc.once('exit', (code) => code !== 0 && reject(new Error(`floor child exited ${code}`)));
  });
}

const cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
const client = await connect(cluster.url);
const rows: string[] = [];
try {
  for (const c of CASES) {
    const path = cluster.models[c.model];
    const input = { [c.input]: tensor('float32', c.shape, new Float32Array(c.shape.reduce((a, b) => a * b, 1)).fill(0.25)) };
    const floors: number[] = [];
    const first: number[] = [];
    const again: number[] = [];
    for (let i = 0; i < REPEAT; i++) {
      floors.push(await floorOnce(path, c));
      const name = `cold-${c.model}-${i}`;
      await client.deploy({
        name,
        model: `${c.model}.onnx`,
        threads: 1,
        replicas: 0,
        autoscale: { minReplicas: 0, maxReplicas: 1, downDelayMs: 200 },
      });
      // First call ever: the head also waits for the replica to say what the model takes.
      let t = performance.now();
      await client.run(name, input, { timeoutMs: 60_000 });
      first.push(performance.now() - t);
      await waitFor(`${name} to scale to zero`, async () => (await actors(client, name)).length === 0 || undefined, 60_000);
      t = performance.now();
      await client.run(name, input, { timeoutMs: 60_000 });
      again.push(performance.now() - t);
      await client.undeploy(name);
    }
    const floor = median(floors);
    for (const [what, xs] of [
      ['first call ever (signature not yet known)', first],
      ['call after scaling back to zero', again],
    ] as const)
      rows.push(`| ${c.model} | ${what} | ${fmt(median(xs), 0)} | ${fmt(floor, 0)} | ${fmt(floor / median(xs), 2)}x |`);
  }
} finally {
  await client.close();
  await cluster.stop();
}
process.stdout.write(
  [
    '## Scale to zero: time to first answer (cold start)\n',
    systemLine('bench', 'bench/cold-start.ts'),
    `- cluster: one head, one agent on this machine; ${REPEAT} measurements each, medians; the floor is a fresh node process loading onnxruntime-node, creating the session (1 thread) and running once, spawn to answer`,
    '',
    '| model | call | Troupe ms | floor ms | floor / Troupe |',
    '| --- | --- | ---: | ---: | ---: |',
    ...rows,
    '',
  ].join('\n'),
);
