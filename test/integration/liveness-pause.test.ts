import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster, ClusterView } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * The head's own stall never restarts actors: a head that was not running (SIGSTOP) did not see
 * its nodes go silent, so when it runs again (SIGCONT) it reads their queued heartbeats, keeps
 * every node ALIVE and leaves every actor where it was. (That a really silent agent is still
 * found SUSPECT, then DEAD, is chaos-nodes.test.ts.)
 */
describe('liveness across a pause of the head', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const view = async () => (await call(cluster.url, 'GET', '/api/v1/cluster', { timeoutMs: 10_000 })).json as ClusterView;
  const mlpActors = (v: ClusterView): ActorView[] => v.deployments.find((d) => d.name === 'mlp')?.actors ?? [];

  before(async () => {
    cluster = await startCluster({
      headArgs: ['--suspect-after-ms', '1000', '--dead-after-ms', '3000'],
      agents: [['--name', 'node-a', '--cpus', '4', '--heartbeat-ms', '200']],
    });
    client = await connect(cluster.url);
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
  });
  after(async () => {
    if (cluster?.head.process.exitCode === null) cluster.head.process.kill('SIGCONT');
    await client?.close();
    await cluster?.stop();
  });

  test('SIGSTOP the head well past dead-after, SIGCONT: no node lost, no actor restarted, inference works', async () => {
    const [actor] = mlpActors(await view());
    assert.ok(actor && actor.state === 'READY' && actor.pid !== null, JSON.stringify(actor));
    const headPid = cluster.head.process.pid!;
    process.kill(headPid, 'SIGSTOP');
    try {
      await sleep(8000);
    } finally {
      process.kill(headPid, 'SIGCONT');
    }
    // Over a few seconds after it runs again, the head must not change its mind about anything.
    const until = Date.now() + 4000;
    while (Date.now() < until) {
      const v = await view();
      assert.deepEqual(
        v.nodes.map((n) => [n.name, n.state]),
        [['node-a', 'ALIVE']],
      );
      const now = mlpActors(v);
      assert.equal(now.length, 1, JSON.stringify(now));
      assert.equal(now[0]!.id, actor.id);
      assert.equal(now[0]!.pid, actor.pid, 'the actor process is the same one');
      assert.equal(now[0]!.restarts, actor.restarts, 'the actor was not restarted');
      assert.equal(now[0]!.state, 'READY');
      await sleep(250);
    }
    const outputs = await waitFor(
      'an inference after the pause',
      async () => client.run('mlp', { x: tensor('float32', [1, 64], seededFloats(64, 7)) }),
      10_000,
    );
    assert.ok(Object.keys(outputs).length > 0);
  });
});
