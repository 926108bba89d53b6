import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { SteadyLoad, progress, retryableCount } from '../helpers/load.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * Nodes that go silent or leave, and a head that is told to stop, under load:
 * - an agent whose process is alive but silent (SIGSTOP: no heartbeats, as after a network cut)
 *   is SUSPECT, then DEAD; its replicas are placed on the other node; when it comes back (SIGCONT)
 *   it rejoins and no duplicate actor survives;
 * - an agent that gets SIGTERM leaves at once and drains its actors (they finish what they hold);
 * - a head that gets SIGTERM finishes the calls it accepted and refuses new ones retryably, while
 *   clients calling replicas directly go on being served without it.
 */
describe('chaos: silent and leaving nodes, graceful shutdown', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let plain: Cluster;
  let retrying: Cluster;
  const agentArgs = (name: string) => ['--name', name, '--cpus', '8', '--heartbeat-ms', '200'];
  const x = (i: number) => ({ x: tensor('float32', [1, 64], seededFloats(64, 300 + (i % 8))) });
  const actorsOf = async (name: string): Promise<ActorView[]> =>
    (await retrying.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
  const nodeState = async (name: string) => (await retrying.describe()).nodes.find((n) => n.name === name)?.state;

  before(async () => {
    cluster = await startCluster({
      headArgs: ['--suspect-after-ms', '600', '--dead-after-ms', '2000'],
      agents: [agentArgs('node-a'), agentArgs('node-b')],
    });
    plain = await connect(cluster.url);
    retrying = await connect(cluster.url, { retries: 20 });
    await plain.deploy({ name: 'mlp', model: 'mlp.onnx', replicas: 2, threads: 1, batch: { maxSize: 8 } });
  });
  after(async () => {
    for (const agent of cluster?.agents ?? []) if (agent.process.exitCode === null) agent.process.kill('SIGCONT');
    await plain?.close();
    await retrying?.close();
    await cluster?.stop();
  });

  test('a silent agent (SIGSTOP) is SUSPECT, then DEAD, its replica moves; back (SIGCONT), it rejoins without duplicates', async () => {
    const agentB = cluster.agents[1]!;
    const onB = (await actorsOf('mlp')).find((a) => a.node === 'node-b')!;
    const loadPlain = new SteadyLoad(plain, 'mlp', x, { concurrency: 100 });
    const loadRetrying = new SteadyLoad(retrying, 'mlp', x, { concurrency: 100, run: { timeoutMs: 30_000 } });
    try {
      await progress(loadRetrying, 300);
      agentB.process.kill('SIGSTOP');
      await waitFor('node-b to be SUSPECT', async () => ((await nodeState('node-b')) !== 'ALIVE' ? true : undefined), 10_000);
      await waitFor('node-b to be DEAD', async () => (await nodeState('node-b')) === 'DEAD', 10_000);
      await waitFor(
        'both replicas READY on node-a',
        async () => {
          const all = await actorsOf('mlp');
          return all.length === 2 && all.every((a) => a.state === 'READY' && a.node === 'node-a') ? all : undefined;
        },
        30_000,
      );
      await progress(loadRetrying, 300);
      agentB.process.kill('SIGCONT');
      await waitFor('node-b to rejoin', async () => (await nodeState('node-b')) === 'ALIVE', 20_000);
      // The replica node-b ran was replaced: its old process is stopped (or left when the head refused it).
      await waitFor("node-b's old actor process to be gone", () => !isAlive(onB.pid!), 15_000);
      await progress(loadRetrying, 300);
    } finally {
      await Promise.all([loadPlain.stop(), loadRetrying.stop()]);
    }
    const all = await actorsOf('mlp');
    assert.equal(all.length, 2);
    assert.ok(all.every((a) => a.state === 'READY' && isAlive(a.pid!)));
    for (const [name, load] of [
      ['without retries', loadPlain],
      ['with retries', loadRetrying],
    ] as const) {
      assert.deepEqual(load.outcome.fatal, [], `${name}: only retryable failures`);
      assert.equal(load.outcome.ok + retryableCount(load.outcome), load.outcome.sent);
    }
    assert.equal(retryableCount(loadRetrying.outcome), 0, JSON.stringify(loadRetrying.outcome.retryable));
  });

  test('SIGTERM to an agent under load: it leaves at once, its actors drain, nothing fails with retries on', async () => {
    // Both replicas are on node-a now; a third one is spread onto node-b.
    await retrying.update({ name: 'mlp', model: 'mlp.onnx', replicas: 3, threads: 1, batch: { maxSize: 8 } });
    const onB = (await actorsOf('mlp')).filter((a) => a.node === 'node-b');
    assert.ok(onB.length >= 1, JSON.stringify(await actorsOf('mlp')));
    const loadPlain = new SteadyLoad(plain, 'mlp', x, { concurrency: 100 });
    const loadRetrying = new SteadyLoad(retrying, 'mlp', x, { concurrency: 100, run: { timeoutMs: 30_000 } });
    try {
      await progress(loadRetrying, 300);
      const agentB = cluster.agents[1]!;
      agentB.process.kill('SIGTERM');
      await waitFor('agent node-b to exit', () => agentB.process.exitCode !== null || agentB.process.signalCode !== null, 20_000);
      assert.equal(agentB.process.exitCode, 0);
      assert.equal(await nodeState('node-b'), 'DEAD');
      await waitFor(
        'three READY replicas on node-a',
        async () => {
          const all = await actorsOf('mlp');
          return all.length === 3 && all.every((a) => a.state === 'READY' && a.node === 'node-a') ? all : undefined;
        },
        30_000,
      );
      assert.ok(
        onB.every((a) => !isAlive(a.pid!)),
        "node-b's actors were stopped with it",
      );
      await progress(loadRetrying, 300);
    } finally {
      await Promise.all([loadPlain.stop(), loadRetrying.stop()]);
    }
    for (const [name, load] of [
      ['without retries', loadPlain],
      ['with retries', loadRetrying],
    ] as const) {
      assert.deepEqual(load.outcome.fatal, [], `${name}: only retryable failures`);
      assert.equal(load.outcome.ok + retryableCount(load.outcome), load.outcome.sent);
    }
    assert.equal(retryableCount(loadRetrying.outcome), 0, JSON.stringify(loadRetrying.outcome.retryable));
  });

  test('SIGTERM to the head: calls it accepted finish, new ones are refused with a retryable code, then it exits; direct calls go on', async () => {
    await retrying.deploy({ name: 'slow', model: 'mobilenet.onnx', threads: 1 });
    const image = tensor('float32', [4, 3, 224, 224], seededFloats(4 * 3 * 224 * 224, 77));
    // This client sends every call through the head; `plain` calls replicas directly once it knows them.
    const viaHead = await connect(cluster.url, { direct: false });
    await waitFor(
      'plain to call mlp directly',
      async () => ((await plain.run('mlp', x(0))) && plain.run('mlp', x(1)).resolvedHere) || undefined,
      10_000,
    );
    const accepted = Array.from({ length: 4 }, () => viaHead.run('slow', { image }));
    // All four are in the head (running or queued) before it is told to stop.
    await waitFor(
      'the four calls to be in the head',
      async () => {
        const d = (await retrying.describe()).deployments.find((v) => v.name === 'slow')!;
        return d.queued + d.actors.reduce((n, a) => n + a.inFlight, 0) === 4;
      },
      10_000,
      5,
    );
    const head = cluster.head;
    head.process.kill('SIGTERM');
    const outcomes = await Promise.allSettled(accepted);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled'],
      String(outcomes.find((o) => o.status === 'rejected')?.reason),
    );
    await waitFor('the head to exit', () => head.process.exitCode !== null, 20_000);
    assert.equal(head.process.exitCode, 0);
    await assert.rejects(Promise.resolve(viaHead.run('slow', { image })), (err: unknown) => err instanceof TroupeError && err.retryable);
    await viaHead.close();
    // The data plane does not go through the head: its replicas still answer a direct client.
    const direct = plain.run('mlp', x(2));
    assert.ok(direct.resolvedHere, 'sent to a replica directly');
    assert.equal((await direct).logits!.shape.join(','), '1,10');
  });
});
