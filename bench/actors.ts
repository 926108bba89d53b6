// Class actor method calls: `npm run bench:actors` (after a build). Calls per second of a trivial
// method (Fragile.count: one increment) through the SDK, head and actor process, with 1 and 64
// calls in flight, on instances deployed with maxConcurrency 1 and 16, and with 64 in flight on
// one whose method is in a concurrency group of 16 (maxConcurrency 1 for the rest): the group
// costs what maxConcurrency 16 does. The floor is the same method called in this process.
// SECONDS=N per cell (default 2) keeps the run short. Writes bench/RESULTS-actors.md (also a step
// of `npm run bench`).
import { writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { connect } from '../runtime/internal.js';
import type { ActorHandle, Cluster } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { Fragile } from '../test/fixtures/ray-parity.js';
import { DIST_ROOT } from '../test/helpers/graphs.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median } from './lib/report.js';

const SECONDS = Number(process.env.SECONDS ?? 2);
const CONCURRENCY = [1, 64];
/** Each instance's setting as the table shows it, its spec, and the calls in flight it is measured at. */
const SETUPS: { shown: string; spec: Partial<Parameters<Cluster['actor']>[0]>; inFlight: number[] }[] = [
  { shown: '1', spec: { maxConcurrency: 1 }, inFlight: CONCURRENCY },
  { shown: '16', spec: { maxConcurrency: 16 }, inFlight: CONCURRENCY },
  {
    shown: "1; count in group 'fast' of 16",
    spec: { concurrencyGroups: { fast: { maxConcurrency: 16, methods: ['count'] } } },
    inFlight: [64],
  },
];

interface Cell {
  rate: number;
  p50Ms: number;
  p99Ms: number;
}

/** `inFlight` loops, each awaiting one call after another for SECONDS: calls per second and latency. */
async function load(call: () => PromiseLike<unknown>, inFlight: number): Promise<Cell> {
  const until = performance.now() + SECONDS * 1000;
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        await call();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    rate: latencies.length / SECONDS,
    p50Ms: median(latencies),
    p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? NaN,
  };
}

const loadBefore = loadavg()[0]!;
const rows: string[] = [];
const floor = await load(async () => new Fragile().count(), 1);
rows.push(`| one process (floor): a method call | - | 1 | ${fmt(floor.rate)} | ${fmt(floor.p50Ms, 4)} | ${fmt(floor.p99Ms, 4)} |`);
const cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8', '--module-dir', DIST_ROOT]] });
let client: Cluster | undefined;
try {
  client = await connect(cluster.url);
  for (const [i, setup] of SETUPS.entries()) {
    const handle: ActorHandle = await client.actor({
      name: `bench-c${i}`,
      module: 'test/fixtures/ray-parity.js',
      export: 'Fragile',
      cpus: 0.1,
      ...setup.spec,
    });
    // Warm: JIT, the first calls' allocations.
    await load(() => handle.call('count'), 8);
    for (const inFlight of setup.inFlight) {
      const cell = await load(() => handle.call('count'), inFlight);
      rows.push(
        `| Troupe: handle.call | ${setup.shown} | ${inFlight} | ${fmt(cell.rate)} | ${fmt(cell.p50Ms, 3)} | ${fmt(cell.p99Ms, 3)} |`,
      );
    }
    await client.undeploy(handle.name);
  }
} finally {
  await client?.close();
  await cluster.stop();
}
const text = [
  '## Class actor method calls: a trivial method, by calls in flight and maxConcurrency (or concurrency group)\n',
  systemLine('bench:actors', 'bench/actors.ts'),
  `- load average (1 min) at the start and the end: ${fmt(loadBefore, 1)}, ${fmt(loadavg()[0]!, 1)} on ${cpus().length} cores (others' work on a shared machine moves every figure here)`,
  `- command: \`npm run bench:actors\` (SECONDS=${SECONDS} per row, after a warm-up of the same length)`,
  '- path: SDK client -> head (queue, session and cycle checks) -> the class actor process -> back (class actor calls always go through the head); one head, one agent, one instance, all on this machine',
  '- method: `Fragile.count()` (test/fixtures/ray-parity.ts), one increment; floor: the same method called in this process',
  '- what maxConcurrency changes: with 1, the next call starts only after the one before it ended, so each answer leaves the instance in a frame of its own; with 16, answers of calls that ran together can share frames',
  '',
  '| path | maxConcurrency | calls in flight | calls/s | p50 ms | p99 ms |',
  '| --- | ---: | ---: | ---: | ---: | ---: |',
  ...rows,
  '',
].join('\n');
process.stdout.write(text);
await writeFile(new URL('../../bench/RESULTS-actors.md', import.meta.url), text);
