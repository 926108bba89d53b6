// Graph overhead: `npm run bench:graphs`. A 3-member ensemble and a 3-step pipeline run as graphs
// on the head, against the same models called one by one from the client (the baseline, measured
// in the same run) and against one member or step called alone, reported as ratios. Writes
// bench/RESULTS-graphs.md.
// Bounded: each load run lasts SECONDS (default 2) after an unmeasured warm-up (see bench/lib/load.ts).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildMlp } from '../models/index.js';
import { combineOutputs, connect, ensemble, model, pipeline, tensor } from '../runtime/index.js';
import type { Cluster, Tensor } from '../runtime/index.js';
import { startCluster } from '../test/helpers/cluster.js';
import { closedLoop } from './lib/load.js';
import type { LoadResult } from './lib/load.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';

const SECONDS = Number(process.env.SECONDS ?? 2);
const CONCURRENCY = [1, 16];
const out: string[] = [];
const say = (text: string) => {
  out.push(text);
  process.stdout.write(`${text}\n`);
};

interface Row {
  label: string;
  results: LoadResult[];
}

function table(rows: Row[], baseline: Row): string {
  const lines = ['| path | concurrency | runs/s | p50 ms | p99 ms | errors | runs/s vs one by one | p50 vs one by one |', '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'];
  for (const row of rows) {
    row.results.forEach((r, i) => {
      const base = baseline.results[i]!;
      lines.push(`| ${row.label} | ${r.concurrency} | ${fmt(r.rps)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p99Ms, 3)} | ${r.errors} | ${fmt(r.rps / base.rps, 2)}x | ${fmt(r.p50Ms / base.p50Ms, 2)}x |`);
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
  await c.deploy(pipeline('chain', [model('link4', { path: 'link4.onnx', threads: 1 }), model('link5', { path: 'link5.onnx', threads: 1 }), model('member1')]));
  const x = tensor('float32', [1, 64], new Float32Array(64).map((_, i) => Math.sin(i)));

  say('# Graph overhead\n');
  say(systemLine());
  say(`- each load run: ${SECONDS} s closed loop after an unmeasured warm-up (0.5 s; at concurrency 1, 1 s windows until three p50s agree within 10%, at most 15 s); client, head, agent and actors share the machine's cores`);
  say('- models: the repo MLP (input [1,64] float32, 64-256-256-10; pipeline links 64-256-256-64), one actor each, 1 intra-op thread, batching off');
  say('- command: `npm run bench:graphs` (SECONDS=2 by default)\n');

  say('## 3-member ensemble (mean)\n');
  const memberNames = ['member1', 'member2', 'member3'];
  const clientMean = (outs: Record<string, Tensor>[]) => combineOutputs({ op: 'mean' }, outs.map((o, i) => ({ name: memberNames[i]!, outputs: o })));
  const ensOneByOne = await load('one by one from the client (await each), mean on the client', async () => {
    const outs: Record<string, Tensor>[] = [];
    for (const name of memberNames) outs.push(await c.run(name, { x }));
    return clientMean(outs);
  });
  const ensParallel = await load('all three at once from the client, mean on the client', async () => clientMean(await Promise.all(memberNames.map((name) => c.run(name, { x })))));
  const ensGraph = await load('ensemble graph on the head', () => c.run('ens', { x }));
  const alone = [];
  for (const name of memberNames) alone.push(await load(`${name} alone, through the head`, () => h.run(name, { x })));
  const aloneDirect = await load('member1 alone, straight to its replica', () => c.run('member1', { x }));
  say(table([ensOneByOne, ensParallel, ensGraph, ...alone, aloneDirect], ensOneByOne));
  const slowest = Math.max(...alone.map((r) => r.results[0]!.p50Ms));
  say(`\nAt concurrency 1 the ensemble's p50 is ${fmt(ensGraph.results[0]!.p50Ms / slowest, 2)}x that of its slowest member called alone through the head (${fmt(ensGraph.results[0]!.p50Ms, 3)} vs ${fmt(slowest, 3)} ms), ${fmt(ensGraph.results[0]!.p50Ms / aloneDirect.results[0]!.p50Ms, 2)}x a member called straight to its replica.`);

  say('\n## 3-step pipeline\n');
  const chain = ['link4', 'link5', 'member1'];
  const pipeOneByOne = await load('one by one from the client (await each, send the output back)', async () => {
    let input: Tensor = x;
    for (const name of chain) input = (await c.run(name, { x: input })).logits!;
    return input;
  });
  const pipeFutures = await load('futures, all three sent at once, chained on the head (direct: false)', () => h.run('member1', { x: h.run('link5', { x: h.run('link4', { x }) }) }));
  const pipeFuturesHere = await load('futures, runs sent straight to replicas, chained in the client', () => c.run('member1', { x: c.run('link5', { x: c.run('link4', { x }) }) }));
  const pipeGraph = await load('pipeline graph on the head', () => c.run('chain', { x }));
  const oneStep = await load('one step (link4) alone, through the head', () => h.run('link4', { x }));
  say(table([pipeOneByOne, pipeFutures, pipeFuturesHere, pipeGraph, oneStep], pipeOneByOne));
  const perStep = (pipeGraph.results[0]!.p50Ms - oneStep.results[0]!.p50Ms) / 2;
  say(`\nAt concurrency 1 each step after the first adds ${fmt(perStep, 3)} ms to the pipeline's p50; one call of a step alone through the head takes ${fmt(oneStep.results[0]!.p50Ms, 3)} ms end to end.`);

  const trace = await c.run('chain', { x }, { trace: true }).trace();
  say('\nOne traced pipeline run (ms from the start of the run on the head):\n');
  say('| step | start | wall | queue | compute | transfer |\n| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const t of trace ?? []) say(`| ${t.step} | ${fmt(t.startMs, 3)} | ${fmt(t.wallMs, 3)} | ${fmt(t.queueMs ?? NaN, 3)} | ${fmt(t.computeMs ?? NaN, 3)} | ${fmt(t.transferMs ?? NaN, 3)} |`);

  await writeFile(new URL('../../bench/RESULTS-graphs.md', import.meta.url), `${out.join('\n')}\n`);
} finally {
  await client?.close();
  await headOnly?.close();
  await cluster.stop();
}
