import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { SteadyLoad, progress, retryableCount } from '../helpers/load.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * Chaos under load: a deployment with replicas on two agents takes steady traffic from two
 * clients (one without retries, one with), while one actor is killed with SIGKILL, then one whole
 * agent. Nothing is timed: the test waits (bounded) for each recovery, and then counts outcomes.
 */
describe('chaos: kill -9 an actor, then an agent, under steady load', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let plain: Cluster;
  let retrying: Cluster;
  const agentArgs = (name: string) => [
    '--name',
    name,
    '--cpus',
    '8',
    '--heartbeat-ms',
    '200',
    '--health-interval-ms',
    '200',
    '--health-timeout-ms',
    '2000',
  ];
  const inputs = Array.from({ length: 16 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 500 + i)));
  const x = (i: number) => ({ x: inputs[i % inputs.length]! });
  const rows = (out: Record<string, unknown>) => {
    const logits = (out as { logits?: { shape: number[] } }).logits;
    return logits && logits.shape.join(',') === '1,10' ? undefined : `unexpected outputs ${JSON.stringify(Object.keys(out))}`;
  };
  const actors = async (): Promise<ActorView[]> => (await retrying.describe()).deployments.find((d) => d.name === 'mlp')?.actors ?? [];

  before(async () => {
    cluster = await startCluster({
      headArgs: ['--suspect-after-ms', '600', '--dead-after-ms', '2000'],
      agents: [agentArgs('node-a'), agentArgs('node-b')],
    });
    plain = await connect(cluster.url);
    retrying = await connect(cluster.url, { retries: 20 });
  });
  after(async () => {
    await plain?.close();
    await retrying?.close();
    await cluster?.stop();
  });

  test('every call succeeds or fails retryably; with retries on, none fails; replicas come back', async () => {
    const view = await plain.deploy({ name: 'mlp', model: 'mlp.onnx', replicas: 4, threads: 1, batch: { maxSize: 8 } });
    assert.deepEqual(view.actors.map((a) => a.node).sort(), ['node-a', 'node-a', 'node-b', 'node-b']);

    // Hundreds of calls in flight: 150 workers per client.
    const loadPlain = new SteadyLoad(plain, 'mlp', x, { concurrency: 150, check: rows });
    const loadRetrying = new SteadyLoad(retrying, 'mlp', x, { concurrency: 150, check: rows, run: { timeoutMs: 30_000 } });
    try {
      await progress(loadRetrying, 500);

      // 1. One actor on node-a, kill -9.
      const victim = view.actors.find((a) => a.node === 'node-a')!;
      process.kill(victim.pid!, 'SIGKILL');
      await waitFor(
        'the killed actor to be READY again with a new pid',
        async () => {
          const a = (await actors()).find((r) => r.id === victim.id);
          return a?.state === 'READY' && a.pid !== victim.pid ? a : undefined;
        },
        30_000,
      );
      await progress(loadRetrying, 500);

      // 2. The whole of node-b, kill -9: its actors die with it, the node goes SUSPECT, then DEAD,
      // and its replicas are placed on node-a.
      const onB = (await actors()).filter((a) => a.node === 'node-b');
      cluster.agents[1]!.process.kill('SIGKILL');
      await waitFor(
        'node-b to be DEAD',
        async () => (await retrying.describe()).nodes.find((n) => n.name === 'node-b')?.state === 'DEAD',
        20_000,
      );
      await waitFor(
        'four READY replicas, all on node-a',
        async () => {
          const all = await actors();
          return all.length === 4 && all.every((a) => a.state === 'READY' && a.node === 'node-a') ? all : undefined;
        },
        30_000,
      );
      await waitFor("node-b's actor processes to be gone", () => onB.every((a) => !isAlive(a.pid!)), 15_000);
      await progress(loadRetrying, 500);
      await progress(loadPlain, 100);
    } finally {
      await Promise.all([loadPlain.stop(), loadRetrying.stop()]);
    }

    for (const [name, load] of [
      ['without retries', loadPlain],
      ['with retries', loadRetrying],
    ] as const) {
      const o = load.outcome;
      assert.deepEqual(o.fatal, [], `${name}: only retryable failures are allowed`);
      assert.equal(o.ok + retryableCount(o), o.sent, `${name}: successes + retryable failures == sent (${JSON.stringify(o)})`);
    }
    assert.equal(
      retryableCount(loadRetrying.outcome),
      0,
      `with retries on, no call fails: ${JSON.stringify(loadRetrying.outcome.retryable)}`,
    );
    assert.ok(loadRetrying.outcome.sent >= 1500, `steady load: ${loadRetrying.outcome.sent} calls sent`);
    // The diagnostic a person reads when tuning: how many calls the plain client saw fail, and why.
    process.stderr.write(
      `# chaos-faults: plain ${JSON.stringify(loadPlain.outcome.retryable)} of ${loadPlain.outcome.sent}; retrying ${loadRetrying.outcome.sent} sent, all ok\n`,
    );
  });

  test('after it all, a call succeeds and the head and surviving agent are the same processes', async () => {
    assert.equal(cluster.head.process.exitCode, null);
    assert.equal(cluster.agents[0]!.process.exitCode, null);
    const out = await plain.run('mlp', x(0));
    assert.deepEqual(out.logits!.shape, [1, 10]);
  });
});
