// Where a call's time goes at concurrency 1: `npm run bench:hops`, writes bench/RESULTS-hops.md.
// Three measurements behind docs/performance.md's account of the targets this machine does not meet:
// what a session.run costs right after its thread slept, how much CPU each process spends per
// call on each path (from /proc, so every process is seen, not only the profiled one), and what
// calling a process that was idle costs compared with one kept busy.
// Bounded: each load run lasts SECONDS (default 3) after its warm-up (see bench/lib/load.ts).
import { writeFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { connect, disableOrtTelemetryByDefault, tensor } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { baselineServer } from './lib/baseline-server.js';
import { keepAliveCaller, oipRequest } from './lib/http-load.js';
import { closedLoop, percentile } from './lib/load.js';
import type { LoadResult } from './lib/load.js';
import { cpuPerRequest } from './lib/process-cpu.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { report } from './lib/report.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

const SECONDS = Number(process.env.SECONDS ?? 3);
const { say, lines: out } = report();

/** p50 and p90 (ms) of `runs` session.run calls, each after the thread slept `gapUs` (Atomics.wait: a real sleep). */
async function runAfterSleep(
  session: ort.InferenceSession,
  feeds: Record<string, ort.Tensor>,
  gapUs: number,
  runs = 3000,
): Promise<[number, number]> {
  const slept = new Int32Array(new SharedArrayBuffer(4));
  const times = new Float64Array(runs);
  for (let i = 0; i < runs; i++) {
    if (gapUs > 0) Atomics.wait(slept, 0, 0, gapUs / 1000);
    const t = performance.now();
    await session.run(feeds);
    times[i] = performance.now() - t;
  }
  times.sort();
  return [percentile(times, 0.5), percentile(times, 0.9)];
}

/**
 * A closed loop at concurrency 1, with CPU per call (µs) of this process and of each one below it.
 * One unmeasured loop first, so V8's compiling the path (seconds of it for a cold HTTP path) is not
 * counted; the measured loop's own warm-up is.
 */
async function cpuPerCall(call: () => PromiseLike<unknown>): Promise<{ result: LoadResult; cpu: Map<string, number> }> {
  await closedLoop(call, { concurrency: 1, seconds: SECONDS });
  const measured = await cpuPerRequest(
    () => closedLoop(call, { concurrency: 1, seconds: SECONDS }),
    (r) => r.requests,
  );
  measured.cpu.delete('agent');
  return measured;
}

// The HTTP hops measured are the front-door workers' (a lone replica would serve HTTP itself by default).
const cluster = await startCluster({ agents: [['--cpus', '64']], headArgs: ['--no-http-handoff'] });
const client = await connect(cluster.url);
const viaHead = await connect(cluster.url, { direct: false });
try {
  say('# Where a call goes at concurrency 1\n');
  say(systemLine('bench:hops', 'bench/hops.ts'));
  say('- model: the repo MLP (input [1,64] float32, 64-256-256-10), 1 intra-op thread; command: `npm run bench:hops`\n');

  say('## session.run right after the thread slept\n');
  say('The same run, in this process, after the thread slept for a while first (as a served model does between calls at concurrency 1):\n');
  const session = await ort.InferenceSession.create(cluster.models.mlp, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = { x: new ort.Tensor('float32', new Float32Array(64).fill(0.5), [1, 64]) };
  say('| slept before each run | p50 ms | p90 ms |\n| ---: | ---: | ---: |');
  for (const gap of [0, 100, 300, 1000]) {
    const [p50, p90] = await runAfterSleep(session, feeds, gap);
    say(`| ${gap} µs | ${fmt(p50, 4)} | ${fmt(p90, 4)} |`);
  }
  await session.release();

  say('\n## CPU per call, by process\n');
  say(
    'Closed loop at concurrency 1 after an unmeasured one; CPU time from /proc over the measured run (its warm-up windows included) divided by the calls made. The relay is bench/baselines/http-relay.ts: an HTTP server forwarding each body over one WebSocket to a process holding the session, with nothing else.\n',
  );
  await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 64 }, maxQueue: 100_000 });
  const data = new Float32Array(64).map((_, i) => Math.sin(i));
  const x = tensor('float32', [1, 64], data);
  const relay = await baselineServer(cluster.models.mlp, 'http-relay');
  const relayCaller = keepAliveCaller({ url: relay.url, method: 'POST', body: Buffer.from(data.buffer) });
  const binary = keepAliveCaller(oipRequest(`${cluster.url}/v2/models/mlp/infer`, 'x', [1, 64], data, 'logits', true));
  const json = keepAliveCaller(oipRequest(`${cluster.url}/v2/models/mlp/infer`, 'x', [1, 64], data, 'logits', false));
  const paths: [string, () => PromiseLike<unknown>][] = [
    ['minimal HTTP relay (baseline)', relayCaller.call],
    ['SDK, straight to the replica', () => client.run('mlp', { x })],
    ['SDK through the head', () => viaHead.run('mlp', { x })],
    ['HTTP OIP, binary tensors', binary.call],
    ['HTTP OIP, JSON tensors', json.call],
  ];
  const roles = ['client', 'relay server', 'relay model process', 'head', 'front-door worker', 'actor'];
  say(`| path | p50 ms | ${roles.map((r) => `${r} µs`).join(' | ')} |\n| --- | ---: | ${roles.map(() => '---:').join(' | ')} |`);
  for (const [label, call] of paths) {
    const { result, cpu } = await cpuPerCall(call);
    say(`| ${label} | ${fmt(result.p50Ms, 3)} | ${roles.map((r) => fmt(cpu.get(r) ?? 0)).join(' | ')} |`);
  }
  for (const c of [relayCaller, binary, json]) c.close();
  relay.stop();

  say('\n## Calling a process that was idle\n');
  say('Three deployments of the same model, one actor each, called straight from the SDK:\n');
  for (const name of ['a', 'b', 'c']) await client.deploy({ name, model: 'mlp.onnx', threads: 1 });
  const names = ['a', 'b', 'c'];
  let next = 0;
  const loads: [string, () => PromiseLike<unknown>][] = [
    ['the same actor each call', () => client.run('a', { x })],
    ['the three actors in turn (each idle for two calls)', () => client.run(names[next++ % 3]!, { x })],
    ['all three at once (an ensemble, fanned out by the client)', () => Promise.all(names.map((n) => client.run(n, { x })))],
  ];
  say('| calls go to | p50 ms | p90 ms |\n| --- | ---: | ---: |');
  for (const [label, call] of loads) {
    const r = await closedLoop(call, { concurrency: 1, seconds: SECONDS });
    say(`| ${label} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p90Ms, 3)} |`);
  }
  await writeFile(new URL('../../bench/RESULTS-hops.md', import.meta.url), `${out.join('\n')}\n`);
} finally {
  await client.close();
  await viaHead.close();
  await cluster.stop();
}
