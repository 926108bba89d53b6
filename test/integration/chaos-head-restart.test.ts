import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import { DIST_ROOT, FNS } from '../helpers/graphs.js';
import type { TestCluster } from '../helpers/cluster.js';
import { SteadyLoad, progress, retryableCount } from '../helpers/load.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * A head restart costs seconds, not deployments: the head keeps deployments, graphs and the
 * identities of running actors in its data directory; the restarted head reloads them, the
 * actors (which outlive the head) reconnect with their secrets and are adopted (same pids, no
 * model reload), agents re-register, and clients reconnect. Under load, with retries on, no call
 * fails; without, every failure is retryable.
 */
describe('chaos: head restart under load', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let plain: Cluster;
  let retrying: Cluster;
  const agentArgs = (name: string) => ['--name', name, '--cpus', '4', '--heartbeat-ms', '200', '--module-dir', DIST_ROOT];
  const x = (i: number) => ({ x: tensor('float32', [1, 64], seededFloats(64, 900 + (i % 8))) });
  const snapshot = async (): Promise<ActorView[]> =>
    (await retrying.describe()).deployments.flatMap((d) => d.actors).sort((a, b) => a.name.localeCompare(b.name));

  before(async () => {
    cluster = await startCluster({ agents: [agentArgs('node-a'), agentArgs('node-b')] });
    plain = await connect(cluster.url);
    retrying = await connect(cluster.url, { retries: 40 });
    await plain.deploy({ name: 'mlp', model: 'mlp.onnx', replicas: 2, threads: 1, batch: { maxSize: 8 } });
    // A graph with a fn step: fn actors are adopted like model actors.
    await plain.deploy({
      graph: 'chain',
      nodes: [
        { kind: 'fn', name: 'halve', fn: `${FNS}#halve` },
        { kind: 'model', name: 'mlp' },
        { kind: 'pipeline', name: 'chain', steps: ['halve', 'mlp'] },
      ],
    });
  });
  after(async () => {
    await plain?.close();
    await retrying?.close();
    await cluster?.stop();
  });

  test('the state file is private (0600) and lists the deployments, the graph and every running actor', async () => {
    const file = join(cluster.dataDir, 'state.json');
    await waitFor('the state file to list the three actors and the graph', async () => {
      const saved = JSON.parse(await readFile(file, 'utf8')) as { actors: unknown[]; graphs: unknown[] };
      return saved.actors.length === 3 && saved.graphs.length === 1;
    });
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const saved = JSON.parse(await readFile(file, 'utf8')) as { deployments: { name: string }[]; graphs: { name: string }[] };
    assert.deepEqual(saved.deployments.map((d) => d.name).sort(), ['halve', 'mlp']);
    assert.deepEqual(
      saved.graphs.map((g) => g.name),
      ['chain'],
    );
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`${signal} to the head: deployments and graphs come back, actors are adopted (same pids), clients recover`, async () => {
      const before = await snapshot();
      assert.equal(before.length, 3);
      assert.ok(before.every((a) => a.state === 'READY' && a.pid !== null));
      const agentPids = cluster.agents.map((a) => a.process.pid);
      const oldHead = cluster.head.process.pid!;

      const loadPlain = new SteadyLoad(plain, 'mlp', x, { concurrency: 100 });
      const loadRetrying = new SteadyLoad(retrying, 'mlp', x, { concurrency: 100, run: { timeoutMs: 30_000 } });
      try {
        await progress(loadRetrying, 300);
        await cluster.restartHead(signal);
        assert.ok(!isAlive(oldHead));
        const after = await waitFor(
          'every actor READY again and both agents back on the new head',
          async () => {
            const now = await snapshot();
            const nodes = (await retrying.describe()).nodes;
            return now.length === 3 &&
              now.every((a) => a.state === 'READY') &&
              nodes.length === 2 &&
              nodes.every((n) => n.state === 'ALIVE')
              ? now
              : undefined;
          },
          30_000,
        );
        assert.deepEqual(
          after.map((a) => [a.name, a.id, a.pid, a.node, a.restarts]),
          before.map((a) => [a.name, a.id, a.pid, a.node, a.restarts]),
          'the same actor processes, adopted',
        );
        await progress(loadRetrying, 300);
        await progress(loadPlain, 100);
        // The graph is registered again once the deployment it calls is READY.
        const out = await retrying.run('chain', x(1));
        assert.deepEqual(out.logits!.shape, [1, 10]);
      } finally {
        await Promise.all([loadPlain.stop(), loadRetrying.stop()]);
      }
      for (const [name, load] of [
        ['without retries', loadPlain],
        ['with retries', loadRetrying],
      ] as const) {
        const o = load.outcome;
        assert.deepEqual(o.fatal, [], `${name}: only retryable failures are allowed`);
        assert.equal(o.ok + retryableCount(o), o.sent, `${name}: successes + retryable failures == sent`);
      }
      assert.equal(
        retryableCount(loadRetrying.outcome),
        0,
        `with retries on, no call fails: ${JSON.stringify(loadRetrying.outcome.retryable)}`,
      );
      assert.deepEqual(
        cluster.agents.map((a) => a.process.pid),
        agentPids,
      );
      assert.ok(
        cluster.agents.every((a) => a.process.exitCode === null),
        'the agents kept running',
      );
      const nodes = (await retrying.describe()).nodes.map((n) => [n.name, n.state]).sort();
      assert.deepEqual(nodes, [
        ['node-a', 'ALIVE'],
        ['node-b', 'ALIVE'],
      ]);
      process.stderr.write(
        `# chaos-head-restart ${signal}: plain ${JSON.stringify(loadPlain.outcome.retryable)} of ${loadPlain.outcome.sent}; retrying ${loadRetrying.outcome.sent} sent, all ok\n`,
      );
    });
  }

  test('a deployment changed between restarts is kept too: scaled to three, all three are adopted after a restart', async () => {
    await retrying.update({ name: 'mlp', model: 'mlp.onnx', replicas: 3, threads: 1, batch: { maxSize: 8 } });
    const before = await snapshot();
    await cluster.restartHead('SIGKILL');
    const after = await waitFor(
      'three READY mlp replicas and the fn actor on the new head',
      async () => {
        const now = await snapshot();
        return now.length === 4 && now.every((a) => a.state === 'READY') ? now : undefined;
      },
      30_000,
    );
    assert.deepEqual(
      after.map((a) => a.pid),
      before.map((a) => a.pid),
    );
  });
});
