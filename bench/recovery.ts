// Recovery times and memory under a soak: `npm run bench:recovery` (after a build; also a step of
// `npm run bench`). Writes bench/RESULTS-recovery.md. Environment:
//   REPEAT=N          measurements of each recovery (default 3; the table shows median, min, max)
//   SOAK_SECONDS=S    length of each path's steady-load soak (default 60; SOAK_SECONDS=600 for the 10-minute one)
//   SOAK_CONCURRENCY  calls in flight during the soak (default 64)
// Figures that claim the head are measured through it: "serving again" with an SDK client of
// `direct: false`, and the head's memory under load with runs through the head (SDK `direct:
// false`, HTTP to its port); the default direct SDK path, which bypasses the head, is soaked and
// labelled too. Every wait is bounded; the cluster is real processes on loopback, as in the tests.
import { writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { processUsage } from '../node-agent/proc-stats.js';
import { connect, tensor } from '../runtime/internal.js';
import type { ActorView, Cluster } from '../runtime/internal.js';
import { startCluster, waitFor } from '../test/helpers/cluster.js';
import type { TestCluster } from '../test/helpers/cluster.js';
import { keepAliveCaller, oipRequest } from './lib/http-load.js';
import { treeRss } from './lib/process-tree.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { report } from './lib/report.js';

const REPEAT = Number(process.env.REPEAT ?? 3);
const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const SOAK_CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 64);
const POLL_MS = 10;

const xData = new Float32Array(64).fill(0.25);
const x = tensor('float32', [1, 64], xData);
const { say, lines } = report();

function stats(seconds: number[]): string {
  const s = [...seconds].sort((a, b) => a - b);
  return `${fmt(s[Math.floor(s.length / 2)]!, 2)} | ${fmt(s[0]!, 2)} | ${fmt(s[s.length - 1]!, 2)}`;
}

async function actors(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

/** kill -9 of a single-replica deployment's actor, to READY again (restart back-off included). */
async function actorCrash(client: Cluster): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < REPEAT; i++) {
    // A fresh deployment each time, so every measurement is a first crash (100 ms back-off).
    const name = `rec-crash-${i}`;
    await client.deploy({ name, model: 'mlp.onnx', threads: 1 });
    const before = (await actors(client, name))[0]!;
    const t = performance.now();
    process.kill(before.pid!, 'SIGKILL');
    await waitFor(
      'the actor to be READY again',
      async () => {
        const a = (await actors(client, name))[0];
        return a?.state === 'READY' && a.pid !== before.pid ? a : undefined;
      },
      60_000,
      POLL_MS,
    );
    times.push((performance.now() - t) / 1000);
    await client.undeploy(name);
  }
  return times;
}

/** kill -9 of the agent of node-b: to node-b DEAD, and to its replica READY on node-a. */
async function nodeLoss(
  cluster: TestCluster,
  client: Cluster,
  agentArgs: (name: string) => string[],
): Promise<{ dead: number[]; ready: number[] }> {
  const dead: number[] = [];
  const ready: number[] = [];
  await client.deploy({ name: 'rec-node', model: 'mlp.onnx', threads: 1, replicas: 2 });
  for (let i = 0; i < REPEAT; i++) {
    const agentB = cluster.agents.find((a) => a.process.exitCode === null && a.process.signalCode === null && a !== cluster.agents[0])!;
    let onB = (await actors(client, 'rec-node')).find((a) => a.node === 'node-b');
    if (!onB) {
      // Spread again: scale to 1 and back to 2 so one replica lands on node-b.
      await client.update({ name: 'rec-node', model: 'mlp.onnx', threads: 1, replicas: 1 });
      await client.update({ name: 'rec-node', model: 'mlp.onnx', threads: 1, replicas: 2 });
      onB = (await actors(client, 'rec-node')).find((a) => a.node === 'node-b')!;
    }
    const t = performance.now();
    agentB.process.kill('SIGKILL');
    await waitFor(
      'node-b to be DEAD',
      async () => (await client.describe()).nodes.find((n) => n.name === 'node-b')?.state === 'DEAD',
      60_000,
      POLL_MS,
    );
    dead.push((performance.now() - t) / 1000);
    await waitFor(
      "node-b's replica READY elsewhere",
      async () => {
        const a = (await actors(client, 'rec-node')).find((r) => r.id === onB.id);
        return a?.state === 'READY' && a.node !== 'node-b' ? a : undefined;
      },
      60_000,
      POLL_MS,
    );
    ready.push((performance.now() - t) / 1000);
    await cluster.startAgent(agentArgs('node-b'));
  }
  await client.undeploy('rec-node');
  return { dead, ready };
}

/** Head killed (SIGKILL) or stopped (SIGTERM) and started again: to listening, to serving runs through it, to every actor adopted. */
async function headRestart(
  cluster: TestCluster,
  client: Cluster,
  viaHead: Cluster,
  signal: 'SIGKILL' | 'SIGTERM',
): Promise<{ listening: number[]; serving: number[]; adopted: number[]; samePids: boolean }> {
  await client.deploy({ name: 'rec-head', model: 'mlp.onnx', threads: 1, replicas: 2 });
  const listening: number[] = [];
  const serving: number[] = [];
  const adopted: number[] = [];
  let samePids = true;
  for (let i = 0; i < REPEAT; i++) {
    const before = (await actors(client, 'rec-head')).map((a) => a.pid).sort();
    const t = performance.now();
    const restarted = cluster.restartHead(signal);
    await restarted;
    listening.push((performance.now() - t) / 1000);
    // Serving: the first run that succeeds through the new head (a direct client could reach the
    // replicas, which outlive the head, without it).
    await waitFor(
      'a call to succeed on the new head',
      async () => (await viaHead.run('rec-head', { x }, { timeoutMs: 2000 })).logits !== undefined,
      60_000,
      POLL_MS,
    );
    serving.push((performance.now() - t) / 1000);
    const after = await waitFor(
      'both actors READY and adopted',
      async () => {
        const now = await actors(client, 'rec-head');
        return now.length === 2 && now.every((a) => a.state === 'READY') ? now : undefined;
      },
      60_000,
      POLL_MS,
    );
    adopted.push((performance.now() - t) / 1000);
    samePids &&= JSON.stringify(after.map((a) => a.pid).sort()) === JSON.stringify(before);
  }
  await client.undeploy('rec-head');
  return { listening, serving, adopted, samePids };
}

/** One way of sending the soak's calls, and the processes whose memory it reports. */
interface SoakPath {
  label: string;
  /** One call, resolved when its answer is in. */
  call: () => PromiseLike<unknown>;
  /** Resident bytes of each process (or group) reported for this path, sampled together. */
  processes: [name: string, rss: () => Promise<number>][];
  close?: () => void;
}

interface SoakResult {
  path: SoakPath;
  seconds: number;
  served: number;
  failed: number;
  before: number[];
  after: number[];
  peak: number[];
}

const rssOf = async (pid: number) => (await processUsage(pid))?.rssBytes ?? Number.NaN;

/** The head's front-door workers: every process under the head but the head itself. */
const workersRss = async (headPid: number) => (await treeRss([headPid])).bytes - (await rssOf(headPid));

/** SOAK_CONCURRENCY calls in flight along `path` for SOAK_SECONDS, sampling its processes' RSS every second. */
async function soak(path: SoakPath): Promise<SoakResult> {
  const rss = () => Promise.all(path.processes.map(([, sample]) => sample()));
  let stop = false;
  let ok = 0;
  let failed = 0;
  const worker = async () => {
    while (!stop) {
      try {
        await path.call();
        ok++;
      } catch {
        failed++;
      }
    }
  };
  const workers = Array.from({ length: SOAK_CONCURRENCY }, worker);
  // Warm up before the first sample, so "before" is a process that has served, not a fresh one.
  await new Promise((r) => setTimeout(r, 3000));
  const before = await rss();
  const okAtStart = ok;
  const failedAtStart = failed;
  const peak = [...before];
  const started = performance.now();
  while (performance.now() - started < SOAK_SECONDS * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    (await rss()).forEach((v, i) => (peak[i] = Math.max(peak[i]!, v)));
  }
  const seconds = (performance.now() - started) / 1000;
  const served = ok - okAtStart;
  const failedInWindow = failed - failedAtStart;
  const after = await rss();
  after.forEach((v, i) => (peak[i] = Math.max(peak[i]!, v)));
  stop = true;
  await Promise.all(workers);
  path.close?.();
  return { path, seconds, served, failed: failedInWindow, before, after, peak };
}

const SOAK_DEPLOYMENT = { name: 'rec-soak', model: 'mlp.onnx', threads: 1, replicas: 2, batch: { maxSize: 32 } };

/** `SOAK_CONCURRENCY` connections, each with one binary OIP inference in flight, to the head's port. */
function httpCalls(url: string): Pick<SoakPath, 'call' | 'close'> {
  const request = oipRequest(`${url}/v2/models/${SOAK_DEPLOYMENT.name}/infer`, 'x', [1, 64], xData, 'logits', true);
  const free = Array.from({ length: SOAK_CONCURRENCY }, () => keepAliveCaller(request));
  const all = [...free];
  return {
    // Each worker of the soak takes a connection for its call and gives it back: one call per connection at a time.
    call: async (): Promise<void> => {
      const caller = free.pop()!;
      try {
        await caller.call();
      } finally {
        free.push(caller);
      }
    },
    close: () => all.forEach((c) => c.close()),
  };
}

function soakTable(results: SoakResult[]): string {
  const mib = (b: number) => fmt(b / 2 ** 20, 1);
  const lines = [
    `Soak: ${SOAK_CONCURRENCY} calls in flight for ${SOAK_SECONDS} s along each path in turn (after 3 s of warm-up), mlp, 2 replicas, batching maxSize 32, on the cluster above unless the path says otherwise. ` +
      '"head" is the head process; "head\'s workers" its front-door worker processes together (children of the head: they take the HTTP connections the head accepts and call the replicas themselves).',
    '',
    '| path | calls served | calls/s | failed | process | RSS before (MiB) | RSS after (MiB) | peak (MiB) | growth |',
    '| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results)
    r.path.processes.forEach(([name], i) =>
      lines.push(
        `| ${i === 0 ? r.path.label : ''} | ${i === 0 ? r.served : ''} | ${i === 0 ? fmt(r.served / r.seconds) : ''} | ${i === 0 ? r.failed : ''} | ${name} | ` +
          `${mib(r.before[i]!)} | ${mib(r.after[i]!)} | ${mib(r.peak[i]!)} | ${fmt(((r.after[i]! - r.before[i]!) / r.before[i]!) * 100, 1)}% |`,
      ),
    );
  return lines.join('\n');
}

const agentArgs = (name: string) => ['--name', name, '--cpus', '8'];
// --no-http-handoff: the front-door workers serve every HTTP connection (no replica takes one over).
const cluster = await startCluster({ agents: [agentArgs('node-a'), agentArgs('node-b')], headArgs: ['--no-http-handoff'] });
const soaks: SoakResult[] = [];
try {
  const client = await connect(cluster.url, { retries: 50 });
  // Every run through the head: for figures that claim the head (serving again after a restart, its memory under load).
  const viaHead = await connect(cluster.url, { retries: 50, direct: false });
  say('## Fault tolerance: recovery times and memory under a soak\n');
  say(systemLine('bench:recovery', 'bench/recovery.ts'));
  say(
    `- load average (1 min) at the start: ${fmt(loadavg()[0]!, 1)}, on ${cpus().length} cores shared with other work (builds, tests, other benchmarks): the figures are from a shared machine\n` +
      `- cluster: one head (\`--no-http-handoff\`), two agents on this machine (default liveness: SUSPECT after 3 s, DEAD after 10 s of silence); ${REPEAT} measurements each; polled every ${POLL_MS} ms\n` +
      '- "serving again": the first run that succeeds through an SDK client of `direct: false` (every run through the head) that reconnects on its own\n',
  );
  const crash = await actorCrash(client);
  const loss = await nodeLoss(cluster, client, agentArgs);
  const killed = await headRestart(cluster, client, viaHead, 'SIGKILL');
  const stopped = await headRestart(cluster, client, viaHead, 'SIGTERM');
  say('| recovery | median s | min s | max s |');
  say('| --- | ---: | ---: | ---: |');
  say(`| actor kill -9 → restarted and READY (back-off 100 ms, model load, warm-up) | ${stats(crash)} |`);
  say(`| agent kill -9 → node DEAD (heartbeat silence, --dead-after-ms 10000) | ${stats(loss.dead)} |`);
  say(`| agent kill -9 → its replica READY on the other node | ${stats(loss.ready)} |`);
  say(`| head kill -9 → new head listening (process start, state reloaded) | ${stats(killed.listening)} |`);
  say(`| head kill -9 → serving again (first run through the new head, SDK \`direct: false\`) | ${stats(killed.serving)} |`);
  say(`| head kill -9 → every actor adopted and READY (same pids: ${killed.samePids ? 'yes' : 'NO'}) | ${stats(killed.adopted)} |`);
  say(`| head SIGTERM (drain) → serving again on the next head (SDK \`direct: false\`) | ${stats(stopped.serving)} |`);
  say(
    `| head SIGTERM (drain) → every actor adopted and READY (same pids: ${stopped.samePids ? 'yes' : 'NO'}) | ${stats(stopped.adopted)} |`,
  );
  say('');

  await client.deploy(SOAK_DEPLOYMENT);
  const headPid = cluster.head.process.pid!;
  const agentPid = cluster.agents[0]!.process.pid!;
  const headProcesses: SoakPath['processes'] = [
    ['head', () => rssOf(headPid)],
    ["head's workers", () => workersRss(headPid)],
    ['agent (node-a)', () => rssOf(agentPid)],
  ];
  soaks.push(
    await soak({
      label: 'SDK, `direct: false`: every run through the head process',
      call: () => viaHead.run('rec-soak', { x }),
      processes: headProcesses,
    }),
  );
  soaks.push(
    await soak({
      label: "HTTP OIP binary to the head's port, front-door workers (`--no-http-handoff`): the head accepts, a worker serves",
      ...httpCalls(cluster.url),
      processes: headProcesses,
    }),
  );
  soaks.push(
    await soak({
      label: 'SDK, `direct: true` (the default): runs straight to the replicas, the head off the data path',
      call: () => client.run('rec-soak', { x }),
      processes: headProcesses,
    }),
  );
  await client.undeploy(SOAK_DEPLOYMENT.name);
  await viaHead.close();
  await client.close();
} finally {
  await cluster.stop();
}

// The head serving every HTTP request in its own process: a cluster of its own, since --http-workers is fixed at start.
const bare = await startCluster({ agents: [agentArgs('node-a')], headArgs: ['--http-workers', '0'] });
try {
  const client = await connect(bare.url, { retries: 50 });
  await client.deploy(SOAK_DEPLOYMENT);
  const headPid = bare.head.process.pid!;
  const agentPid = bare.agents[0]!.process.pid!;
  soaks.push(
    await soak({
      label: 'HTTP OIP binary to the head (`--http-workers 0`, one agent): every request served in the head process',
      ...httpCalls(bare.url),
      processes: [
        ['head', () => rssOf(headPid)],
        ['agent', () => rssOf(agentPid)],
      ],
    }),
  );
  await client.undeploy(SOAK_DEPLOYMENT.name);
  await client.close();
} finally {
  await bare.stop();
}
say(soakTable(soaks));
say(`\n(10-minute soak: \`SOAK_SECONDS=600 npm run bench:recovery\`.)`);
await writeFile(new URL('../../bench/RESULTS-recovery.md', import.meta.url), `${lines.join('\n')}\n`);
