import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('walking skeleton: head, agent and actor processes, SDK over WebSocket', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster();
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('an MLP served end to end equals onnxruntime-node in-process, element for element', async () => {
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    assert.equal(view.state, 'READY');
    const actor = view.actors[0]!;
    assert.equal(actor.state, 'READY');
    assert.ok(actor.pid && isAlive(actor.pid), 'the actor is a live process of its own');
    assert.notEqual(actor.pid, process.pid);
    assert.deepEqual(view.metadata?.inputs, [{ name: 'x', dtype: 'float32', shape: ['N', 64] }]);

    const x = tensor('float32', [3, 64], seededFloats(3 * 64, 7));
    const served = await client.run('mlp', { x });
    const local = await runInProcess(cluster.models.mlp, { x });
    assert.deepEqual(Object.keys(served), ['logits']);
    assert.equal(served.logits!.dtype, 'float32');
    assert.deepEqual(served.logits!.shape, [3, 10]);
    assert.deepEqual([...(served.logits!.data as Float32Array)], [...(local.logits!.data as Float32Array)]);
  });

  test('a convolutional net with a dynamic batch dimension equals in-process results', async () => {
    await client.deploy({ name: 'cnn', model: 'cnn.onnx', threads: 1 });
    for (const batch of [1, 4]) {
      const image = tensor('float32', [batch, 3, 32, 32], seededFloats(batch * 3 * 32 * 32, batch));
      const served = await client.run('cnn', { image });
      const local = await runInProcess(cluster.models.cnn, { image });
      assert.deepEqual(served.logits!.shape, [batch, 10]);
      assert.deepEqual([...(served.logits!.data as Float32Array)], [...(local.logits!.data as Float32Array)]);
    }
  });

  test('run returns a future at once; many calls in flight each get their own rows', async () => {
    const inputs = Array.from({ length: 32 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 100 + i)));
    const futures = inputs.map((x) => client.run('mlp', { x }));
    assert.ok(futures.every((f) => typeof f.id === 'string' && f.id.length > 0));
    const results = await Promise.all(futures);
    for (let i = 0; i < inputs.length; i++) {
      const local = await runInProcess(cluster.models.mlp, { x: inputs[i]! });
      assert.deepEqual([...(results[i]!.logits!.data as Float32Array)], [...(local.logits!.data as Float32Array)], `call ${i}`);
    }
  });

  test('describe shows the node and both deployments with their actors', async () => {
    const view = await client.describe();
    assert.equal(view.nodes.length, 1);
    assert.equal(view.nodes[0]!.state, 'ALIVE');
    assert.deepEqual(view.deployments.map((d) => [d.name, d.state]).sort(), [
      ['cnn', 'READY'],
      ['mlp', 'READY'],
    ]);
  });

  test('undeploy stops the actor process', async () => {
    const before = await client.describe();
    const pidOf = (name: string) => before.deployments.find((d) => d.name === name)!.actors[0]!.pid!;
    const [mlpPid, cnnPid] = [pidOf('mlp'), pidOf('cnn')];
    await client.undeploy('cnn');
    await waitFor('the cnn actor process to exit', () => !isAlive(cnnPid), 10_000);
    const after = await client.describe();
    assert.deepEqual(
      after.deployments.map((d) => d.name),
      ['mlp'],
    );
    assert.ok(isAlive(mlpPid), 'the other deployment keeps running');
  });
});
