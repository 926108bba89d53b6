import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { handoffAddon } from '../../runtime/handoff/addon.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { counter } from '../helpers/metrics.js';
import { call, nodeCall } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';

const skip = typeof handoffAddon() === 'string' ? `the handoff addon is not built: ${handoffAddon() as string}` : false;

/** A counter's series from the head's /metrics whose labels include `labels`, summed. */
async function view(client: Cluster, name: string): Promise<DeploymentView> {
  const found = (await client.describe()).deployments.find((d) => d.name === name);
  assert.ok(found, `no deployment '${name}'`);
  return found;
}

/** Fresh connections (each closed after one request) until `served` says the path took one; bounded. */
async function untilServedBy(url: string, model: string, served: () => Promise<boolean>, what: string): Promise<void> {
  const { body, headers } = mlpBinaryRequest(seededFloats(64, 1), 1);
  await waitFor(
    what,
    async () => {
      const answer = await nodeCall(url, 'POST', `/v2/models/${model}/infer`, { body, headers: { ...headers, connection: 'close' } });
      assert.equal(answer.status, 200, answer.body.toString());
      return served();
    },
    30_000,
  );
}

describe('fast by default: a deployment that names no layout gets the benchmarks’ one, and says why', { timeout: 170_000, skip }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  before(async () => {
    // The head as `troupe head` starts it: no handoff flag.
    cluster = await startCluster();
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("a cheap model alone: one session on the main thread, batching, its lone replica serving HTTP itself, with onnxruntime's numbers", async () => {
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx' }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    await untilServedBy(
      cluster.url,
      'mlp',
      async () => (await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"')) > 0,
      'a connection handed to the replica',
    );
    const d = await view(client, 'mlp');
    assert.ok(d.layout, 'describe() says how it runs');
    assert.equal(d.layout.auto, true);
    assert.match(d.layout.chosen, /^1 replica x 1 instance x 1 thread, batches of up to 64 rows, HTTP served by the replica$/);
    assert.match(d.layout.reason, /^chosen at load: a lone call runs in [\d.]+ ms, cheaper than a hop/);
    assert.match(d.layout.reason, /HTTP: its one replica serves its HTTP connections itself/);
    const actorLayout = d.actors[0]!.layout!;
    assert.deepEqual([actorLayout.instances, actorLayout.threads, actorLayout.batchMaxSize, actorLayout.chosen], [1, 1, 64, 'auto']);
    assert.ok(actorLayout.runMs! > 0);
    // The replica answers as onnxruntime does, rows batched or not.
    const x = seededFloats(3 * 64, 7);
    const { body, headers } = mlpBinaryRequest(x, 3);
    const answer = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body, headers });
    assert.equal(answer.status, 200, answer.body.toString());
    const want = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [3, 64], x) })).logits!.data as Float32Array;
    assertClose(floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))), want, 'handed-over answer');
    // Triton's model configuration reports the batching the replica chose.
    const config = JSON.parse((await call(cluster.url, 'GET', '/v2/models/mlp/config')).body.toString()) as { max_batch_size: number };
    assert.equal(config.max_batch_size, 64);
  });

  test('a costly model alone: a session of one thread per core, batching off', async () => {
    const d = await client.deploy({ name: 'cnn', model: 'mobilenet.onnx' });
    const layout = d.actors[0]!.layout!;
    const cores = Math.min(16, availableParallelism());
    assert.equal(layout.chosen, 'auto');
    assert.deepEqual([layout.instances, layout.threads, layout.batchMaxSize], [cores, 1, 1], layout.reason);
    assert.match(layout.reason, /costly: 1 ms or more/);
    await client.undeploy('cnn');
  });

  test('a second replica sends HTTP through the workers, balanced by request; what the spec names wins', async () => {
    await client.update({ name: 'mlp', model: 'mlp.onnx', replicas: 2 });
    const handed = await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"');
    const workers = await counter(cluster.url, 'troupe_front_door_requests_total', 'model="mlp"');
    await untilServedBy(
      cluster.url,
      'mlp',
      async () => (await counter(cluster.url, 'troupe_front_door_requests_total', 'model="mlp"')) > workers,
      'a request served by the front-door workers',
    );
    assert.equal(await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"'), handed, 'no connection handed over');
    const two = await view(client, 'mlp');
    assert.match(two.layout!.chosen, /^2 replicas x 1 instance x 1 thread, batches of up to 64 rows, HTTP through the front-door workers$/);
    assert.match(two.layout!.reason, /2 replicas: the front-door workers balance its requests one by one/);

    await client.update({ name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 1 } });
    const named = await view(client, 'mlp');
    assert.equal(named.layout!.auto, false);
    assert.match(named.layout!.chosen, /^1 replica x 1 instance x 1 thread, batching off/);
    assert.match(
      named.layout!.reason,
      /^as the deployment names it: 1 instance x 1 thread as the deployment names them; batching as the deployment names it/,
    );
  });
});

describe('fast by default: --no-http-handoff keeps HTTP with the workers', { timeout: 120_000, skip }, () => {
  test('a lone replica is not handed connections, and describe() says why', async () => {
    const cluster = await startCluster({ headArgs: ['--no-http-handoff'] });
    const client = await connect(cluster.url);
    try {
      await client.deploy({ name: 'mlp', model: 'mlp.onnx' });
      await untilServedBy(
        cluster.url,
        'mlp',
        async () => (await counter(cluster.url, 'troupe_front_door_requests_total', 'model="mlp"')) > 0,
        'a request served by the front-door workers',
      );
      assert.equal(await counter(cluster.url, 'troupe_http_handoffs_total', 'model="mlp"'), 0);
      const d = await view(client, 'mlp');
      assert.match(d.layout!.chosen, /HTTP through the front-door workers$/);
      assert.match(d.layout!.reason, /handoff turned off \(--no-http-handoff\)/);
    } finally {
      await client.close();
      await cluster.stop();
    }
  });
});
