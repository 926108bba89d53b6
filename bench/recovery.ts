// Recovery times and memory under a soak: `npm run bench:recovery` (after a build). Prints a
// markdown section for bench/RESULTS.md. Environment:
//   REPEAT=N          measurements of each recovery (default 3; the table shows median, min, max)
//   SOAK_SECONDS=S    length of the steady-load soak (default 60; SOAK_SECONDS=600 for the 10-minute one)
//   SOAK_CONCURRENCY  SDK calls in flight during the soak (default 64)
// Every wait is bounded; the cluster is real processes on loopback, as in the tests.
import { processUsage } from '../node-agent/proc-stats.js';
import { connect, tensor } from '../runtime/internal.js';
import type { ActorView, Cluster } from '../runtime/internal.js';
import { startCluster, waitFor } from '../test/helpers/cluster.js';
import type { TestCluster } from '../test/helpers/cluster.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { report } from './lib/report.js';

const REPEAT = Number(process.env.REPEAT ?? 3);
const SOAK_SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const SOAK_CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 64);
const POLL_MS = 10;

const x = tensor('float32', [1, 64], new Float32Array(64).fill(0.25));
const { say } = report();

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

/** Head killed (SIGKILL) or stopped (SIGTERM) and started again: to listening, to serving calls, to every actor adopted. */
async function headRestart(
  cluster: TestCluster,
  client: Cluster,
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
    // Serving: the first call that succeeds through the (reconnecting) client.
    await waitFor(
      'a call to succeed on the new head',
      async () => (await client.run('rec-head', { x }, { timeoutMs: 2000 })).logits !== undefined,
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

/** RSS of head and agent before and after a steady-load soak, and what the soak served. */
async function soak(cluster: TestCluster, client: Cluster): Promise<string> {
  await client.deploy({ name: 'rec-soak', model: 'mlp.onnx', threads: 1, replicas: 2, batch: { maxSize: 32 } });
  const pids = [
    ['head', cluster.head.process.pid!],
    ['agent', cluster.agents[0]!.process.pid!],
  ] as const;
  const rss = async () => Promise.all(pids.map(async ([, pid]) => (await processUsage(pid))?.rssBytes ?? Number.NaN));
  let stop = false;
  let ok = 0;
  let failed = 0;
  const worker = async () => {
    while (!stop) {
      try {
        await client.run('rec-soak', { x });
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
  const peak = [...before];
  const started = performance.now();
  while (performance.now() - started < SOAK_SECONDS * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    (await rss()).forEach((v, i) => (peak[i] = Math.max(peak[i]!, v)));
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await rss();
  stop = true;
  await Promise.all(workers);
  await client.undeploy('rec-soak');
  const mib = (b: number) => fmt(b / 2 ** 20, 1);
  const lines = [
    `Soak: ${fmt(seconds)} s of steady load (${SOAK_CONCURRENCY} SDK calls in flight, mlp, 2 replicas, batching maxSize 32): ${ok - okAtStart} calls served (${fmt((ok - okAtStart) / seconds)}/s), ${failed} failed.`,
    '',
    '| process | RSS before (MiB) | RSS after (MiB) | peak (MiB) | growth |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...pids.map(
      ([name], i) =>
        `| ${name} | ${mib(before[i]!)} | ${mib(after[i]!)} | ${mib(peak[i]!)} | ${fmt(((after[i]! - before[i]!) / before[i]!) * 100, 1)}% |`,
    ),
  ];
  return lines.join('\n');
}

const agentArgs = (name: string) => ['--name', name, '--cpus', '8'];
const cluster = await startCluster({ agents: [agentArgs('node-a'), agentArgs('node-b')] });
try {
  const client = await connect(cluster.url, { retries: 50 });
  say('## Fault tolerance: recovery times and memory under a soak\n');
  say(systemLine('bench', 'bench/recovery.ts'));
  say(
    `- cluster: one head, two agents on this machine (default liveness: SUSPECT after 3 s, DEAD after 10 s of silence); ${REPEAT} measurements each; polled every ${POLL_MS} ms\n`,
  );
  const crash = await actorCrash(client);
  const loss = await nodeLoss(cluster, client, agentArgs);
  const killed = await headRestart(cluster, client, 'SIGKILL');
  const stopped = await headRestart(cluster, client, 'SIGTERM');
  say('| recovery | median s | min s | max s |');
  say('| --- | ---: | ---: | ---: |');
  say(`| actor kill -9 → restarted and READY (back-off 100 ms, model load, warm-up) | ${stats(crash)} |`);
  say(`| agent kill -9 → node DEAD (heartbeat silence, --dead-after-ms 10000) | ${stats(loss.dead)} |`);
  say(`| agent kill -9 → its replica READY on the other node | ${stats(loss.ready)} |`);
  say(`| head kill -9 → new head listening (process start, state reloaded) | ${stats(killed.listening)} |`);
  say(`| head kill -9 → serving again (first call through a reconnecting client) | ${stats(killed.serving)} |`);
  say(`| head kill -9 → every actor adopted and READY (same pids: ${killed.samePids ? 'yes' : 'NO'}) | ${stats(killed.adopted)} |`);
  say(`| head SIGTERM (drain) → serving again on the next head | ${stats(stopped.serving)} |`);
  say(
    `| head SIGTERM (drain) → every actor adopted and READY (same pids: ${stopped.samePids ? 'yes' : 'NO'}) | ${stats(stopped.adopted)} |`,
  );
  say('');
  say(await soak(cluster, client));
  say(`\n(10-minute soak: \`SOAK_SECONDS=600 npm run bench:recovery\`.)`);
  await client.close();
} finally {
  await cluster.stop();
}
