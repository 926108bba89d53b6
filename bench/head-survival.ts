// /healthz latency on the head during each attack of issue 47: `npm run bench:head-survival`
// (after a build; a few seconds per attack). Writes bench/RESULTS-head-survival.md. Figures only,
// never asserted (the tests assert the answers: test/integration/head-kept-connections.test.ts,
// head-stall.test.ts, hostile-values.test.ts). Environment:
//   SECONDS_PER_ATTACK=S   how long each timed attack runs (default 3)
//   ATTACKER_NICE=N[,M]    the attacking thread's nice values, one table each (default 10,0: 0 runs it beside the head as an equal)
//   ONLY=TEXT              only the attacks whose name contains TEXT (and the baseline), to stdout: the results file is left as it is
// /healthz is asked on a fresh connection each time (so the connection cap is measured too), every
// 20 ms; one that is refused, or not answered within 10 s, counts as failed and is not in the figures.
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Agent } from 'node:http';
import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import { connect } from '../runtime/internal.js';
import type { ActorHandle } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import { GRAPH_AGENT } from '../test/helpers/graphs.js';
import { call, nodeCall } from '../test/helpers/http.js';
import { counter } from '../test/helpers/metrics.js';
import { freePort } from '../test/helpers/free-port.js';
import { polledDuring } from './lib/healthz-poller.js';
import { report } from './lib/report.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';

const SECONDS = Number(process.env.SECONDS_PER_ATTACK ?? 3);
const MAX_CONNECTIONS = 1000;
const JSON_HEADERS = { 'content-type': 'application/json' };

/** The head's event-loop windows are 10 s (head/state/event-loop.ts): two of them quiet between attacks keep one attack's stall out of the next one's figure. */
const QUIET_BETWEEN_MS = 21_000;
/**
 * The attacker's thread runs at each of these nice values in turn (ATTACKER_NICE=10,0 by default;
 * a single value runs one table): at 10 it stands for an attacker whose CPU is another machine's,
 * at 0 it takes the two cores beside the head as an equal. The head's own work for each attack
 * (accepting, reading, parsing, refusing) is never lowered.
 */
const ATTACKER_NICES = (process.env.ATTACKER_NICE ?? '10,0').split(',').map(Number);
const ONLY = process.env.ONLY;

const nested = (depth: number, leaf: string) => '['.repeat(depth) + leaf + ']'.repeat(depth);

/** Runs `once` in `parallel` loops for SECONDS, ignoring its answers (refusals are the point). */
async function forSeconds(parallel: number, once: () => Promise<unknown>): Promise<void> {
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (performance.now() < until) await once().catch(() => {});
    }),
  );
}

/** ~30 MB of JSON: 2M numbers declared as a [1, 64] tensor (refused once parsed). */
function largeInferBody(): Buffer {
  const values = 2_000_000;
  return Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,64],"data":[${'0.123456789012,'.repeat(values - 1)}0.1]}]}`);
}

/** `path` with `body`, once on each of 14 kept-alive connections that asked /healthz first (so they are the head's own). */
async function onKeptConnections(url: string, path: string, body: Buffer): Promise<void> {
  await Promise.all(
    Array.from({ length: 14 }, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        await nodeCall(url, 'GET', '/healthz', { agent, timeoutMs: 30_000 });
        await nodeCall(url, 'POST', path, { agent, body, headers: JSON_HEADERS, timeoutMs: 120_000 }).catch(() => {});
      } finally {
        agent.destroy();
      }
    }),
  );
}

/** 1,500 sockets (past the cap of 1,000) that open with an inference request line and send a header byte every 2 s, each reopened as it closes. */
async function slowloris(url: string): Promise<void> {
  const { hostname, port } = new URL(url);
  let attacking = true;
  const open = new Set<Socket>();
  const slot = (): void => {
    if (!attacking) return;
    const socket = netConnect(Number(port), hostname);
    open.add(socket);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.once('connect', () => socket.write('POST /v2/models/mlp/infer HTTP/1.1\r\nX-Slow: '));
    const drip = setInterval(() => socket.write('a'), 2000);
    socket.once('close', () => {
      clearInterval(drip);
      open.delete(socket);
      setTimeout(slot, 50);
    });
  };
  for (let i = 0; i < 1500; i++) slot();
  await new Promise((resolve) => setTimeout(resolve, Math.max(SECONDS, 5) * 1000));
  attacking = false;
  for (const socket of open) socket.destroy();
}

async function main(): Promise<void> {
  const { say, lines } = report();
  const probePort = await freePort();
  const probeUrl = `http://127.0.0.1:${probePort}`;
  const cluster = await startCluster({
    headArgs: ['--max-connections', String(MAX_CONNECTIONS), '--http-workers', '1', '--probe-port', String(probePort)],
    agents: [[...GRAPH_AGENT, '--max-inference-ms', '2000']],
  });
  const client = await connect(cluster.url);
  try {
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp?wait=true', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: JSON_HEADERS,
    });
    if (put.status >= 300) throw new Error(`deploying mlp: ${put.status} ${put.body.toString()}`);
    const hostile: ActorHandle = await client.actor({ name: 'hostile', module: 'test/fixtures/hostile.js', export: 'Hostile', cpus: 0.1 });
    await hostile.call('pid');

    const deep = nested(10_000, '"a"');
    const big = largeInferBody();
    const attacks: [string, () => Promise<unknown>][] = [
      ['none (baseline)', () => new Promise((resolve) => setTimeout(resolve, SECONDS * 1000))],
      [
        'deep values, 10,000 arrays (generate_stream, generate, a method call), 4 in flight',
        () =>
          forSeconds(4, async () => {
            await call(cluster.url, 'POST', '/v2/models/hostile/generate_stream', {
              body: `{"text_input": ${deep}}`,
              headers: JSON_HEADERS,
            });
            await call(cluster.url, 'POST', '/v2/models/mlp/generate', { body: `{"x": ${deep}}`, headers: JSON_HEADERS });
            await call(cluster.url, 'POST', '/api/v1/actors/hostile/echo', { body: `{"args": [${deep}]}`, headers: JSON_HEADERS });
          }),
      ],
      [
        `14 x ${(big.length / 2 ** 20).toFixed(0)} MB JSON inferences on kept-alive head connections`,
        () => onKeptConnections(cluster.url, '/v2/models/mlp/infer', big),
      ],
      [
        `14 x ${(big.length / 2 ** 20).toFixed(0)} MB JSON job bodies`,
        () => onKeptConnections(cluster.url, '/api/v1/deployments/mlp/jobs', big),
      ],
      [`slowloris: 1,500 sockets against --max-connections ${MAX_CONNECTIONS}`, () => slowloris(cluster.url)],
      [
        'wedged methods: 8 calls in flight to a method that never settles (--max-inference-ms 2000)',
        () => forSeconds(8, () => Promise.resolve(hostile.call('never'))),
      ],
    ];
    say(`# /healthz on the head under attack (bench/head-survival.ts)\n\n${systemLine('bench:head-survival', 'bench/head-survival.ts')}`);
    say(
      `- load average (1 / 5 / 15 min) at the start: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} (anything else running shares the cores, and moves these figures)\n` +
        '- notes:' +
        ` /healthz is asked on a fresh connection every 20 ms (connect + answer), on the head's main port and on its probe port (\`--probe-port\`: a listener of its own, whose accept queue only probes wait in), each from a thread of its own (not the attacker's); a failed poll was refused or unanswered in 10 s. The last column is the head's own event-loop delay (its /metrics gauge, the worst of the attack's 10 s windows, with 21 s of quiet before each attack): a poll slower than it waited on something other than the head's event loop (the CPU the attacker took, or a front-door worker). Each attack runs once per nice value of the attacker's thread, in turn: ${ATTACKER_NICES.join(', ')} (ATTACKER_NICE chooses; at 10 it stands for an attacker whose CPU is another machine's, at 0 it is the head's equal on the same cores).\n`,
    );
    for (const nice of ATTACKER_NICES) {
      say(`\n## The attacker's thread at nice ${nice}\n`);
      say(
        '| attack | main port: polls | failed | p50 ms | p99 ms | max ms | probe port (`--probe-port`): polls | failed | p50 ms | p99 ms | max ms | head event-loop delay, max ms |',
      );
      say('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const [name, work] of attacks) {
        if (ONLY && name !== attacks[0]![0] && !name.includes(ONLY)) continue;
        await new Promise((resolve) => setTimeout(resolve, QUIET_BETWEEN_MS));
        const polled = await polledDuring([cluster.url, probeUrl], work, nice);
        const loopMaxMs = 1000 * (await counter(cluster.url, 'troupe_head_event_loop_delay_seconds', 'stat="max"'));
        const columns = polled.map(({ ms, failed }) => {
          const s = [...ms].sort((a, b) => a - b);
          const at = (q: number) => (s.length ? fmt(s[Math.min(s.length - 1, Math.floor(q * s.length))]!, 1) : '-');
          return `${ms.length + failed} | ${failed} | ${at(0.5)} | ${at(0.99)} | ${s.length ? fmt(s.at(-1)!, 1) : '-'}`;
        });
        say(`| ${name} | ${columns.join(' | ')} | ${fmt(loopMaxMs, 1)} |`);
      }
    }
    say(`\nThe head was ${cluster.head.process.exitCode === null ? 'alive' : 'gone'} at the end.`);
    if (!ONLY) writeFileSync(new URL('../../bench/RESULTS-head-survival.md', import.meta.url), `${lines.join('\n')}\n`);
  } finally {
    await client.close();
    await cluster.stop();
  }
}

await main();
