// Streams through a pipeline: `npm run bench:streaming` (after a build). A 3-step streaming
// pipeline (a generator method that yields its input's rows one at a time -> the MLP -> a method
// that labels each row), read with `cluster.stream`, against the same three steps in one process
// (the same class, onnxruntime-node's session.run per item, the same labelling): time to the first
// item and items per second. ITEMS=N rows per run (default 2000), REPEAT=N runs each (default 5).
import ort from 'onnxruntime-node';
import { connect, method, model, pipeline, tensor } from '../runtime/internal.js';
import type { Cluster, Tensor } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { RowStream } from '../test/fixtures/stream-steps.js';
import { DIST_ROOT } from '../test/helpers/graphs.js';
import { seededFloats } from '../test/helpers/tensors.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median } from './lib/report.js';

const ITEMS = Number(process.env.ITEMS ?? 2000);
const REPEAT = Number(process.env.REPEAT ?? 5);
const WINDOWS = [1, 16];

interface Timing {
  firstMs: number;
  totalMs: number;
}

/** Reads `items` to the end, timing the first item and the whole; checks the count. */
async function timed(open: () => AsyncIterable<Record<string, Tensor>>): Promise<Timing> {
  const t0 = performance.now();
  let firstMs = 0;
  let n = 0;
  for await (const item of open()) {
    if (n++ === 0) firstMs = performance.now() - t0;
    if (!item.label) throw new Error('an item without its label');
  }
  if (n !== ITEMS) throw new Error(`${n} items, not ${ITEMS}`);
  return { firstMs, totalMs: performance.now() - t0 };
}

/** The same three steps in this process: the generator, session.run per item, the labelling. */
async function inProcess(modelPath: string, x: Tensor): Promise<Timing[]> {
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const rows = new RowStream();
  const labels = new RowStream();
  async function* steps(): AsyncGenerator<Record<string, Tensor>> {
    for await (const item of rows.rows({ x })) {
      const row = item.x!;
      const out = await session.run({ x: new ort.Tensor('float32', row.data as Float32Array, [...row.shape]) });
      const logits = out.logits!;
      yield labels.label({ logits: { dtype: 'float32', shape: [...logits.dims], data: logits.data as Float32Array } });
    }
  }
  const timings: Timing[] = [];
  try {
    for (let i = 0; i < REPEAT; i++) timings.push(await timed(steps));
  } finally {
    await session.release();
  }
  return timings;
}

const cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8', '--module-dir', DIST_ROOT]] });
let client: Cluster | undefined;
const rows: string[] = [];
try {
  client = await connect(cluster.url);
  await client.actor({ name: 'rows', module: 'test/fixtures/stream-steps.js', export: 'RowStream', cpus: 0.1 });
  await client.actor({ name: 'labels', module: 'test/fixtures/stream-steps.js', export: 'RowStream', cpus: 0.1 });
  await client.deploy(
    pipeline('by-row', [
      method('split', 'rows', 'rows'),
      model('mlp', { path: 'mlp.onnx', threads: 1, cpus: 0.1 }),
      method('pick', 'labels', 'label'),
    ]),
  );
  const x = tensor('float32', [ITEMS, 64], seededFloats(ITEMS * 64, 5));
  // Warm both paths once (JIT, the session's first run, the actors' first calls).
  await timed(() => client!.stream('by-row', { x }));
  const local = await inProcess(cluster.models.mlp, x);
  const localFirst = median(local.map((t) => t.firstMs));
  const localRate = ITEMS / (median(local.map((t) => t.totalMs)) / 1000);
  rows.push(`| one process (floor) | - | ${fmt(localFirst, 2)} | ${fmt(localRate, 0)} | 1x | 1x |`);
  for (const window of WINDOWS) {
    const runs: Timing[] = [];
    for (let i = 0; i < REPEAT; i++) runs.push(await timed(() => client!.stream('by-row', { x }, { window })));
    const first = median(runs.map((t) => t.firstMs));
    const rate = ITEMS / (median(runs.map((t) => t.totalMs)) / 1000);
    rows.push(
      `| Troupe: cluster.stream, 3 actors | ${window} | ${fmt(first, 2)} | ${fmt(rate, 0)} | ${fmt(first / localFirst, 1)}x | ${fmt(rate / localRate, 3)}x |`,
    );
  }
} finally {
  await client?.close();
  await cluster.stop();
}
process.stdout.write(
  [
    '## Streams through a pipeline: generator method -> model -> method\n',
    systemLine('bench:streaming', 'bench/streaming.ts'),
    `- command: \`npm run bench:streaming\` (ITEMS=${ITEMS}, REPEAT=${REPEAT}); medians of ${REPEAT} runs after a warm-up run`,
    '- pipeline: `rows` (an async generator method yielding each of the input rows as a [1, 64] tensor) -> the MLP (64->10, 1 thread) -> `label` (a plain method: argmax) on a second class actor; one head, one agent, three actor processes on this machine',
    '- floor: the same class and steps in one process: the generator, `session.run` per item, the labelling',
    '',
    '| path | reader window | first item ms | items/s | first item vs floor | items/s vs floor |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
    '',
  ].join('\n'),
);
