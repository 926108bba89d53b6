import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster, ClusterView } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { seededFloats } from '../helpers/tensors.js';

const actorsOf = (view: ClusterView, name: string): ActorView[] => view.deployments.find((d) => d.name === name)?.actors ?? [];

describe('cluster: GPU-pinned placement, lifecycle and node membership', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let stateRoot: string;
  const agentArgs = (name: string, extra: string[] = []) => [
    '--name',
    name,
    '--cpus',
    '8',
    '--state-dir',
    join(stateRoot, name),
    '--heartbeat-ms',
    '200',
    '--health-interval-ms',
    '200',
    '--health-timeout-ms',
    '1500',
    ...extra,
  ];
  const x = () => ({ x: tensor('float32', [1, 64], seededFloats(64, 3)) });

  before(async () => {
    stateRoot = await mkdtemp(join(tmpdir(), 'troupe-state-'));
    cluster = await startCluster({
      headArgs: ['--suspect-after-ms', '600', '--dead-after-ms', '2500'],
      agents: [agentArgs('node-a', ['--simulate-gpus', '2']), agentArgs('node-b', ['--simulate-gpus', '1']), agentArgs('node-c')],
    });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    await rm(stateRoot, { recursive: true, force: true });
  });

  test('nodes report their simulated GPUs', async () => {
    const view = await client.describe();
    const gpus = Object.fromEntries(view.nodes.map((n) => [n.name, n.gpus.map((g) => `${g.index}:${g.simulated ? 'simulated' : 'real'}`)]));
    assert.deepEqual(gpus, { 'node-a': ['0:simulated', '1:simulated'], 'node-b': ['0:simulated'], 'node-c': [] });
  });

  test('whole-GPU replicas spread over nodes; each actor sees exactly its GPU', async () => {
    const view = await client.deploy({ name: 'whole', model: 'mlp.onnx', gpus: 1, replicas: 2, threads: 1 });
    const placed = view.actors.map((a) => [a.node, a.gpus.join(','), a.visibleDevices]).sort();
    assert.deepEqual(placed, [
      ['node-a', '0', '0'],
      ['node-b', '0', '0'],
    ]);
    assert.ok(view.actors.every((a) => a.device === `gpu:${a.gpus.join(',')}`));
  });

  test('fractional GPUs pack onto one device before another is used', async () => {
    const view = await client.deploy({ name: 'half', model: 'mlp.onnx', gpus: 0.5, replicas: 2, threads: 1 });
    assert.deepEqual(
      view.actors.map((a) => [a.node, a.visibleDevices]),
      [
        ['node-a', '1'],
        ['node-a', '1'],
      ],
    );
  });

  test('CPU replicas spread over all three nodes and see no GPU', async () => {
    const view = await client.deploy({ name: 'cpu', model: 'mlp.onnx', replicas: 3, threads: 1 });
    assert.deepEqual(view.actors.map((a) => a.node).sort(), ['node-a', 'node-b', 'node-c']);
    assert.ok(view.actors.every((a) => a.visibleDevices === '' && a.gpus.length === 0 && a.device === 'cpu'));
    const out = await client.run('cpu', x());
    assert.deepEqual(out.logits!.shape, [1, 10]);
  });

  test('an infeasible deployment stays PENDING with a reason, and is placed when a suitable node joins', async () => {
    const pending = await client.deploy({ name: 'big', model: 'mlp.onnx', gpus: 2, threads: 1 }, { wait: false });
    const actor = pending.actors[0]!;
    assert.equal(actor.state, 'PENDING');
    assert.match(actor.reason ?? '', /^needs 2 GPUs and 1 CPU; /);
    assert.match(actor.reason ?? '', /node-a has 0 of 2 GPUs free \(held by (whole#\d, half#\d, half#\d|[^)]*)\)/);
    assert.match(actor.reason ?? '', /node-b has 0 of 1 GPUs free/);
    assert.match(actor.reason ?? '', /node-c has no GPU/);
    await cluster.startAgent(agentArgs('node-d', ['--simulate-gpus', '2']));
    const placed = await waitFor('big to be READY on node-d', async () => {
      const a = actorsOf(await client.describe(), 'big')[0];
      return a?.state === 'READY' ? a : undefined;
    });
    assert.equal(placed.node, 'node-d');
    assert.equal(placed.visibleDevices, '0,1');
  });

  test('kill -9 of an actor: it is restarted, READY again, and the restart count shows it', async () => {
    const before = actorsOf(await client.describe(), 'cpu').find((a) => a.node === 'node-c')!;
    process.kill(before.pid!, 'SIGKILL');
    const after = await waitFor('the actor to be READY again with a new pid', async () => {
      const a = actorsOf(await client.describe(), 'cpu').find((r) => r.id === before.id);
      return a?.state === 'READY' && a.pid !== before.pid ? a : undefined;
    });
    assert.equal(after.restarts, before.restarts + 1);
    assert.ok(isAlive(after.pid!));
    assert.deepEqual((await client.run('cpu', x())).logits!.shape, [1, 10]);
  });

  test('a hung actor (SIGSTOP) is killed by its agent and restarted', async () => {
    const before = actorsOf(await client.describe(), 'cpu').find((a) => a.node === 'node-b')!;
    process.kill(before.pid!, 'SIGSTOP');
    try {
      const after = await waitFor(
        'the hung actor to be replaced',
        async () => {
          const a = actorsOf(await client.describe(), 'cpu').find((r) => r.id === before.id);
          return a?.state === 'READY' && a.pid !== before.pid ? a : undefined;
        },
        20_000,
      );
      assert.equal(after.restarts, before.restarts + 1);
      assert.ok(!isAlive(before.pid!), 'the hung process was killed');
    } finally {
      if (isAlive(before.pid!)) process.kill(before.pid!, 'SIGKILL');
    }
  });

  test('kill -9 of an agent: its node goes DEAD and its actors come up on the others', async () => {
    const agentB = cluster.agents[1]!;
    const onB = actorsOf(await client.describe(), 'cpu').filter((a) => a.node === 'node-b');
    assert.equal(onB.length, 1);
    agentB.process.kill('SIGKILL');
    await waitFor(
      'node-b to be DEAD',
      async () => (await client.describe()).nodes.find((n) => n.name === 'node-b')?.state === 'DEAD',
      10_000,
    );
    const moved = await waitFor(
      'the cpu replica to be READY elsewhere',
      async () => {
        const a = actorsOf(await client.describe(), 'cpu').find((r) => r.id === onB[0]!.id);
        return a?.state === 'READY' ? a : undefined;
      },
      20_000,
    );
    assert.notEqual(moved.node, 'node-b');
    // The orphaned actor process of the killed agent exits on its own (its IPC parent is gone).
    await waitFor('the old actor process to exit', () => !isAlive(onB[0]!.pid!), 10_000);
    // whole#? lived on node-b's only GPU; with no whole GPU free elsewhere except node-d's, it moves or waits with a reason.
    const whole = actorsOf(await client.describe(), 'whole');
    assert.ok(whole.every((a) => a.node !== 'node-b'));
    assert.deepEqual((await client.run('cpu', x())).logits!.shape, [1, 10]);
  });

  test('scaling down drains and frees resources; undeploy removes', async () => {
    const view = await client.update({ name: 'cpu', model: 'mlp.onnx', replicas: 1, threads: 1 });
    assert.equal(view.actors.filter((a) => a.state === 'READY').length, 1);
    await waitFor('scaled-down actors to be gone', async () => actorsOf(await client.describe(), 'cpu').length === 1);
    await client.undeploy('half');
    assert.equal(actorsOf(await client.describe(), 'half').length, 0);
  });
});
