// Graph overhead: `npm run bench:graphs`. A 3-member ensemble and a 3-step pipeline run as graphs
// on the head and as graph files served by one actor, against the same models called one by one from the client (the baseline, measured
// in the same run) and against one member or step called alone, reported as ratios. Writes
// bench/RESULTS-graphs.md.
// Bounded: each load run lasts SECONDS (default 2) after an unmeasured warm-up (see bench/lib/load.ts).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildMlp } from '../models/index.js';
import { combineOutputs, connect, ensemble, model, pipeline, tensor } from '../runtime/internal.js';
import type { Cluster, Tensor } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { measureFloor } from './lib/floor.js';
import { closedLoop } from './lib/load.js';
import type { LoadResult } from './lib/load.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { report } from './lib/report.js';

const SECONDS = Number(process.env.SECONDS ?? 2);
const CONCURRENCY = [1, 16];
const { say, lines: out } = report();

interface Row {
  label: string;
  results: LoadResult[];
}

function table(rows: Row[], baseline: Row): string {
  const lines = [
    '| path | concurrency | runs/s | p50 ms | p99 ms | errors | runs/s vs one by one | p50 vs one by one |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const row of rows) {
    row.results.forEach((r, i) => {
      const base = baseline.results[i]!;
      lines.push(
        `| ${row.label} | ${r.concurrency} | ${fmt(r.rps)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p99Ms, 3)} | ${r.errors} | ${fmt(r.rps / base.rps, 2)}x | ${fmt(r.p50Ms / base.p50Ms, 2)}x |`,
      );
    });
  }
  return lines.join('\n');
}

async function load(label: string, call: () => PromiseLike<unknown>): Promise<Row> {
  const results: LoadResult[] = [];
  for (const concurrency of CONCURRENCY) results.push(await closedLoop(call, { concurrency, seconds: SECONDS }));
  return { label, results };
}

const cluster = await startCluster({ agents: [['--cpus', '64']] });
let client: Cluster | undefined;
let headOnly: Cluster | undefined;
try {
  client = await connect(cluster.url);
  // Runs of single models from `c` go straight to replicas; `h` sends everything through the head.
  headOnly = await connect(cluster.url, { direct: false });
  const c = client;
  const h = headOnly;
  for (const seed of [1, 2, 3]) await writeFile(join(cluster.modelDir, `member${seed}.onnx`), buildMlp({ seed }).bytes);
  for (const seed of [4, 5]) await writeFile(join(cluster.modelDir, `link${seed}.onnx`), buildMlp({ seed, outputDim: 64 }).bytes);
  const members = [1, 2, 3].map((s) => model(`member${s}`, { path: `member${s}.onnx`, threads: 1 }));
  await c.deploy(ensemble('ens', members, { combine: 'mean' }));
  await c.deploy(
    pipeline('chain', [
      model('link4', { path: 'link4.onnx', threads: 1 }),
      model('link5', { path: 'link5.onnx', threads: 1 }),
      model('member1'),
    ]),
  );
  // The same graphs as files served by one actor each (actors/graph-model.ts): steps are sessions in one process.
  const file = (graph: string, names: string[], composite: Record<string, unknown>) =>
    JSON.stringify({
      graph,
      nodes: [...names.map((n) => ({ kind: 'model', name: n, model: `${n}.onnx` })), { name: graph, ...composite }],
    });
  await writeFile(
    join(cluster.modelDir, 'ens.graph.json'),
    file('ens', ['member1', 'member2', 'member3'], {
      kind: 'ensemble',
      members: ['member1', 'member2', 'member3'],
      combine: { op: 'mean' },
    }),
  );
  await writeFile(
    join(cluster.modelDir, 'chain.graph.json'),
    file('chain', ['link4', 'link5', 'member1'], { kind: 'pipeline', steps: ['link4', 'link5', 'member1'] }),
  );
  await c.deploy({ name: 'ens1', model: 'ens.graph.json', threads: 1 });
  await c.deploy({ name: 'chain1', model: 'chain.graph.json', threads: 1 });
  const x = tensor(
    'float32',
    [1, 64],
    new Float32Array(64).map((_, i) => Math.sin(i)),
  );

  say('# Graph overhead\n');
  say(systemLine('bench:graphs', 'bench/graphs.ts'));
  say(
    `- each load run: ${SECONDS} s closed loop after an unmeasured warm-up (0.5 s; at concurrency 1, 1 s windows until three p50s agree within 10%, at most 15 s); client, head, agent and actors share the machine's cores`,
  );
  say(
    '- models: the repo MLP (input [1,64] float32, 64-256-256-10; pipeline links 64-256-256-64), one actor each, 1 intra-op thread, batching off; the `*.graph.json` rows serve the same models as sessions of one actor (actors/graph-model.ts)',
  );
  say('- command: `npm run bench:graphs` (SECONDS=2 by default)\n');

  say('## 3-member ensemble (mean)\n');
  const memberNames = ['member1', 'member2', 'member3'];
  const clientMean = (outs: Record<string, Tensor>[]) =>
    combineOutputs(
      { op: 'mean' },
      outs.map((o, i) => ({ name: memberNames[i]!, outputs: o })),
    );
  const ensOneByOne = await load('one by one from the client (await each), mean on the client', async () => {
    const outs: Record<string, Tensor>[] = [];
    for (const name of memberNames) outs.push(await c.run(name, { x }));
    return clientMean(outs);
  });
  const ensParallel = await load('all three at once from the client, mean on the client', async () =>
    clientMean(await Promise.all(memberNames.map((name) => c.run(name, { x })))),
  );
  const ensGraph = await load('ensemble graph on the head', () => c.run('ens', { x }));
  const alone = [];
  for (const name of memberNames) alone.push(await load(`${name} alone, through the head`, () => h.run(name, { x })));
  const aloneDirect = [];
  for (const name of memberNames) aloneDirect.push(await load(`${name} alone, straight to its replica`, () => c.run(name, { x })));
  const ensOneActor = await load('ensemble served by one actor (ens.graph.json), straight to it', () => c.run('ens1', { x }));
  const ensOneActorHead = await load('ensemble served by one actor (ens.graph.json), through the head', () => h.run('ens1', { x }));
  say(table([ensOneByOne, ensParallel, ensGraph, ...alone, ...aloneDirect, ensOneActor, ensOneActorHead], ensOneByOne));
  const slowest = Math.max(...alone.map((r) => r.results[0]!.p50Ms));
  const slowestDirect = Math.max(...aloneDirect.map((r) => r.results[0]!.p50Ms));
  const p50 = (row: Row) => row.results[0]!.p50Ms;
  say(`\nAt concurrency 1, against the slowest member called alone by the same path:`);
  say(
    `- ensemble graph on the head: ${fmt(p50(ensGraph) / slowest, 2)}x (${fmt(p50(ensGraph), 3)} vs ${fmt(slowest, 3)} ms, through the head)`,
  );
  say(
    `- ensemble served by one actor, straight to it: ${fmt(p50(ensOneActor) / slowestDirect, 2)}x (${fmt(p50(ensOneActor), 3)} vs ${fmt(slowestDirect, 3)} ms)`,
  );
  say(
    `- ensemble served by one actor, through the head: ${fmt(p50(ensOneActorHead) / slowest, 2)}x (${fmt(p50(ensOneActorHead), 3)} vs ${fmt(slowest, 3)} ms)`,
  );

  say('\n## 3-step pipeline\n');
  const chain = ['link4', 'link5', 'member1'];
  const pipeOneByOne = await load('one by one from the client (await each, send the output back)', async () => {
    let input: Tensor = x;
    for (const name of chain) input = (await c.run(name, { x: input })).logits!;
    return input;
  });
  const pipeFutures = await load('futures, all three sent at once, chained on the head (direct: false)', () =>
    h.run('member1', { x: h.run('link5', { x: h.run('link4', { x }) }) }),
  );
  const pipeFuturesHere = await load('futures, runs sent straight to replicas, chained in the client', () =>
    c.run('member1', { x: c.run('link5', { x: c.run('link4', { x }) }) }),
  );
  const pipeGraph = await load('pipeline graph on the head', () => c.run('chain', { x }));
  const oneStep = await load('one step (link4) alone, through the head', () => h.run('link4', { x }));
  const oneStepDirect = await load('one step (link4) alone, straight to its replica', () => c.run('link4', { x }));
  const pipeOneActor = await load('pipeline served by one actor (chain.graph.json), straight to it', () => c.run('chain1', { x }));
  const pipeOneActorHead = await load('pipeline served by one actor (chain.graph.json), through the head', () => h.run('chain1', { x }));
  say(table([pipeOneByOne, pipeFutures, pipeFuturesHere, pipeGraph, oneStep, oneStepDirect, pipeOneActor, pipeOneActorHead], pipeOneByOne));
  // A single call's overhead: its p50 end to end minus raw session.run's p50 for the same model.
  const raw = await measureFloor(join(cluster.modelDir, 'link4.onnx'), { name: 'x', shape: (b) => [b, 64] }, 1, 2, 1);
  const perStep = (row: Row, single: Row) => (p50(row) - p50(single)) / 2;
  say(
    `\nAt concurrency 1 (raw session.run of one step: ${fmt(raw.p50Ms, 4)} ms), what each step after the first adds to the pipeline's p50, against one call's overhead by the same path:`,
  );
  say(
    `- pipeline graph on the head: ${fmt(perStep(pipeGraph, oneStep), 3)} ms per step; one call through the head: ${fmt(p50(oneStep) - raw.p50Ms, 3)} ms overhead`,
  );
  say(
    `- pipeline served by one actor, straight to it: ${fmt(perStep(pipeOneActor, oneStepDirect), 3)} ms per step; one call straight to a replica: ${fmt(p50(oneStepDirect) - raw.p50Ms, 3)} ms overhead`,
  );
  say(
    `- pipeline served by one actor, through the head: ${fmt(perStep(pipeOneActorHead, oneStep), 3)} ms per step; one call through the head: ${fmt(p50(oneStep) - raw.p50Ms, 3)} ms overhead`,
  );

  const trace = await c.run('chain', { x }, { trace: true }).trace();
  say('\nOne traced pipeline run (ms from the start of the run on the head):\n');
  say('| step | start | wall | queue | compute | transfer |\n| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const t of trace ?? [])
    say(
      `| ${t.step} | ${fmt(t.startMs, 3)} | ${fmt(t.wallMs, 3)} | ${fmt(t.queueMs ?? NaN, 3)} | ${fmt(t.computeMs ?? NaN, 3)} | ${fmt(t.transferMs ?? NaN, 3)} |`,
    );

  await writeFile(new URL('../../bench/RESULTS-graphs.md', import.meta.url), `${out.join('\n')}\n`);
} finally {
  await client?.close();
  await headOnly?.close();
  await cluster.stop();
}
