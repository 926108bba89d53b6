// Multiplexed deployments: `npm run bench:multiplex` (after a build; also a step of `npm run bench`)
// writes bench/RESULTS-multiplex.md.
// Calls per second and model loads per call of one multiplexed deployment (TENANTS MLP tenants, 2
// replicas of maxModels 4) under a Zipf workload (a few tenants take most calls) and a sweep (each
// tenant in turn: an LRU's worst case), each with and without a bad tenant (a file of random
// bytes, every tenth call), beside the same calls to one plain deployment of one of the models (the
// ceiling: no loads) and an LRU simulation of the loads (the floor for loads per call). ROUNDS
// rounds of every row, interleaved, so a busy machine's swings touch all rows alike (default 3),
// DURATION_MS per row (default 2000), CONCURRENCY calls in flight (default 8). The client sends every
// run through the head (`direct: false`): a run naming a model always goes through the head, and
// the plain deployment's runs would otherwise go straight to its replicas, a shorter path than
// the multiplexed rows it is the ceiling of.
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Rng, buildMlp } from '../models/index.js';
import { TroupeError, connect, tensor } from '../runtime/internal.js';
import { startCluster, waitFor } from '../test/helpers/cluster.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median } from './lib/report.js';

const DURATION_MS = Number(process.env.DURATION_MS ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const TENANTS = Number(process.env.TENANTS ?? 24);
const MAX_MODELS = 4;
const REPLICAS = 2;
const ZIPF_S = 1.1;

const names = Array.from({ length: TENANTS }, (_, i) => `t${String(i).padStart(2, '0')}`);
const x = tensor('float32', [1, 64], new Float32Array(64).fill(0.25));

/** The next tenant of a workload: Zipf draws (rank r with weight 1/r^s) or a sweep; `bad` every tenth call when asked. */
function workload(kind: 'zipf' | 'sweep', withBad: boolean, seed: number): () => string {
  const rng = new Rng(seed);
  const weights = names.map((_, r) => 1 / (r + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  let n = 0;
  let sweep = 0;
  return () => {
    if (withBad && n++ % 10 === 9) return 'bad';
    if (kind === 'sweep') return names[sweep++ % names.length]!;
    let u = rng.next() * total;
    for (const [i, w] of weights.entries()) if ((u -= w) <= 0) return names[i]!;
    return names.at(-1)!;
  };
}

/** Loads a single LRU cache of every replica's room together would make for `sequence` (bad calls never load). */
function lruLoads(sequence: readonly string[]): number {
  const lru: string[] = [];
  let loads = 0;
  for (const name of sequence) {
    if (name === 'bad') continue;
    const at = lru.indexOf(name);
    if (at >= 0) lru.splice(at, 1);
    else loads++;
    lru.push(name);
    if (lru.length > MAX_MODELS * REPLICAS) lru.shift();
  }
  return loads;
}

/** Sum of a multiplex counter over the deployment's models (bad included), from /metrics. */
async function counter(url: string, name: string, deployment: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{model="${deployment}",member="[^"]+"\\} (\\d+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

interface Row {
  label: string;
  calls: number;
  ok: number;
  failed: number;
  rps: number;
  loads: number | undefined;
  lru: number | undefined;
  failedLoads: number | undefined;
}

const loadBefore = loadavg()[0]!;
const cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
const client = await connect(cluster.url, { direct: false });
const rows: Row[] = [];
try {
  const dir = join(cluster.modelDir, 'mt');
  await mkdir(dir);
  for (const [i, name] of names.entries()) await writeFile(join(dir, `${name}.onnx`), buildMlp({ seed: 100 + i, hidden: [32] }).bytes);
  await writeFile(join(dir, 'bad.onnx'), randomBytes(4096));
  await writeFile(join(cluster.modelDir, 'one.onnx'), buildMlp({ seed: 100, hidden: [32] }).bytes);
  const common = { replicas: REPLICAS, cpus: 0.5, threads: 1, batch: { maxSize: 1 } };
  await client.deploy({ name: 'one', model: 'one.onnx', ...common });
  await client.deploy({ name: 'mt', model: 'mt', ...common, multiplex: { maxModels: MAX_MODELS } });

  /** Runs `next` for DURATION_MS with CONCURRENCY calls in flight; returns what it called. */
  const drive = async (label: string, call: (name: string) => Promise<unknown>, next: () => string, measureLoads: boolean) => {
    const loadsBefore = measureLoads ? await counter(cluster.url, 'troupe_multiplex_loads_total', 'mt') : 0;
    const failedBefore = measureLoads ? await counter(cluster.url, 'troupe_multiplex_load_failures_total', 'mt') : 0;
    const callsBefore = measureLoads ? await counter(cluster.url, 'troupe_multiplex_hits_total', 'mt') : 0;
    const missesBefore = measureLoads ? await counter(cluster.url, 'troupe_multiplex_misses_total', 'mt') : 0;
    const sequence: string[] = [];
    let ok = 0;
    let failed = 0;
    const end = performance.now() + DURATION_MS;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < end) {
          const name = next();
          sequence.push(name);
          try {
            await call(name);
            ok++;
          } catch (err) {
            if (!(err instanceof TroupeError) || name !== 'bad') throw err;
            failed++;
          }
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    let loads: number | undefined;
    let failedLoads: number | undefined;
    if (measureLoads) {
      // The replicas report about once a second: wait until their hits and misses cover the healthy calls.
      await waitFor(
        `${label}: the replicas' reports`,
        async () => {
          const seen =
            (await counter(cluster.url, 'troupe_multiplex_hits_total', 'mt')) -
            callsBefore +
            (await counter(cluster.url, 'troupe_multiplex_misses_total', 'mt')) -
            missesBefore;
          return seen >= ok ? true : undefined;
        },
        30_000,
      );
      loads = (await counter(cluster.url, 'troupe_multiplex_loads_total', 'mt')) - loadsBefore;
      failedLoads = (await counter(cluster.url, 'troupe_multiplex_load_failures_total', 'mt')) - failedBefore;
    }
    rows.push({
      label,
      calls: sequence.length,
      ok,
      failed,
      rps: sequence.length / seconds,
      loads,
      lru: measureLoads ? lruLoads(sequence) : undefined,
      failedLoads,
    });
  };

  // Warm-up: every model loaded once somewhere, the plain deployment's replicas too.
  for (const name of names) await client.run('mt', { x }, { model: name });
  for (let i = 0; i < 20; i++) await client.run('one', { x });

  let seed = 1;
  for (let round = 0; round < ROUNDS; round++) {
    await drive(
      'plain deployment, one model (ceiling)',
      async () => client.run('one', { x }),
      () => 'one',
      false,
    );
    for (const kind of ['zipf', 'sweep'] as const)
      for (const withBad of [false, true])
        await drive(
          `${kind}${withBad ? ' + bad tenant (every 10th call)' : ''}`,
          async (name) => client.run('mt', { x }, { model: name }),
          workload(kind, withBad, seed++),
          true,
        );
  }
} finally {
  await client.close();
  await cluster.stop();
}

/** Each row's rounds together: median calls/s, loads and calls summed over the rounds. */
const labels = [...new Set(rows.map((r) => r.label))];
const merged = labels.map((label) => {
  const of = rows.filter((r) => r.label === label);
  const sum = (key: 'calls' | 'failed' | 'loads' | 'lru' | 'failedLoads') => of.reduce((n, r) => n + (r[key] ?? 0), 0);
  return {
    label,
    rps: median(of.map((r) => r.rps)),
    calls: sum('calls'),
    failed: sum('failed'),
    loads: of[0]!.loads === undefined ? undefined : sum('loads'),
    lru: of[0]!.lru === undefined ? undefined : sum('lru'),
    failedLoads: of[0]!.failedLoads === undefined ? undefined : sum('failedLoads'),
  };
});
const ceiling = merged[0]!.rps;
process.stdout.write(
  [
    '## Multiplexing: calls/s and loads per call\n',
    systemLine('bench:multiplex', 'bench/multiplex.ts'),
    `- load average (1 min) at the start and the end: ${fmt(loadBefore, 1)}, ${fmt(loadavg()[0]!, 1)} (others' work on a shared machine moves calls/s; loads per call do not depend on it)`,
    `- cluster: one head, one agent on this machine; deployment of ${TENANTS} MLP tenants (64-32-10), ${REPLICAS} replicas of maxModels ${MAX_MODELS}, ` +
      `batch 1, 1 thread each; SDK client of \`direct: false\` (every row's runs through the head, the plain deployment's too), ${CONCURRENCY} calls in flight; ${ROUNDS} rounds of ${DURATION_MS} ms a row, interleaved ` +
      '(`ROUNDS`, `DURATION_MS`, `CONCURRENCY`, `TENANTS`): calls/s is the median round, the other columns sum the rounds',
    `- zipf: tenant of rank r drawn with weight 1/r^${ZIPF_S}; sweep: each tenant in turn; bad: a tenant file of random bytes every tenth call (its 422 counted as failed)`,
    "- loads: models loaded by the replicas (`troupe_multiplex_loads_total`); LRU: the loads one LRU cache of all the replicas' room would make for the same calls; " +
      'failed loads: loads of the bad tenant tried (each remembered for 10 s, doubling)',
    '',
    '| workload | calls | calls/s | vs plain | failed (bad) | loads/call | LRU loads/call | failed loads |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...merged.map(
      (r) =>
        `| ${r.label} | ${r.calls} | ${fmt(r.rps)} | ${fmt(r.rps / ceiling, 2)}x | ${r.failed} | ${r.loads === undefined ? '' : fmt(r.loads / r.calls, 3)} | ` +
        `${r.lru === undefined ? '' : fmt(r.lru / r.calls, 3)} | ${r.failedLoads ?? ''} |`,
    ),
    '',
  ].join('\n'),
);
