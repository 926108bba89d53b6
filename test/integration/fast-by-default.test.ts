import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_IDLE_SPIN_MS, connect, tensor } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { handoffAddon } from '../../runtime/handoff/addon.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { counter } from '../helpers/metrics.js';
import { binaryBody, call, nodeCall } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';

const skip = typeof handoffAddon() === 'string' ? `the handoff addon is not built: ${handoffAddon() as string}` : false;

/** Deployment `name` as describe() reports it. */
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
    assert.match(
      d.layout.chosen,
      /^1 replica x 1 instance x 1 thread, batches of up to 64 rows, spinning 0.2 ms when idle, HTTP served by the replica$/,
    );
    assert.match(
      d.layout.reason,
      /it polls 0.2 ms for the next call after its last \(a cheap run costs less than waking a sleeping process\)/,
    );
    assert.match(d.layout.reason, /^chosen at load: a lone call runs in [\d.]+ ms, cheaper than a hop/);
    assert.match(d.layout.reason, /HTTP: its one replica serves its HTTP connections itself/);
    const actorLayout = d.actors[0]!.layout!;
    assert.deepEqual(
      [actorLayout.instances, actorLayout.threads, actorLayout.batchMaxSize, actorLayout.idleSpinMs, actorLayout.chosen],
      [1, 1, 64, DEFAULT_IDLE_SPIN_MS, 'auto'],
    );
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

  test('a costly model alone: one replica per core chosen at load, each a session on its main thread, each serving HTTP; a count named wins', async () => {
    // The MLP holds a CPU of the agent's: the costly model's replicas are chosen beside nothing else.
    await client.undeploy('mlp');
    const cores = Math.min(16, availableParallelism());
    const d = await client.deploy({ name: 'cnn', model: 'mobilenet.onnx' });
    // deploy() answers once every replica chosen at load is READY.
    assert.equal(d.actors.filter((a) => a.state === 'READY').length, cores, JSON.stringify(d.actors.map((a) => [a.name, a.state])));
    for (const a of d.actors) {
      const layout = a.layout!;
      assert.equal(layout.chosen, 'auto');
      assert.deepEqual(
        [layout.instances, layout.threads, layout.batchMaxSize, layout.inferenceThread, layout.idleSpinMs],
        [1, 1, 1, false, 0],
        layout.reason,
      );
      assert.match(layout.reason, /it sleeps at once when idle \(a wake-up is small beside a costly run\)/);
      assert.equal(layout.replicasWanted, cores);
      assert.match(
        layout.reason,
        /costly: 1 ms or more\), so one session of one thread on the main thread per replica, and one replica per core/,
      );
    }
    const pids = new Set(d.actors.map((a) => a.pid));
    const described = await view(client, 'cnn');
    assert.match(
      described.layout!.chosen,
      new RegExp(`^${cores} replicas? x 1 instance x 1 thread, batching off, HTTP served by the replica$`),
    );
    assert.match(described.layout!.reason, new RegExp(`the head runs the ${cores} asked`));
    if (cores > 1)
      assert.match(described.layout!.reason, /were chosen at load, one per core: each serves the HTTP connections handed to it/);
    // Every replica takes connections of its own, and answers as onnxruntime does.
    const image = seededFloats(3 * 224 * 224, 11);
    const request = binaryBody(
      {
        inputs: [{ name: 'image', shape: [1, 3, 224, 224], datatype: 'FP32', parameters: { binary_data_size: image.byteLength } }],
        outputs: [{ name: 'logits', parameters: { binary_data: true } }],
      },
      [new Uint8Array(image.buffer)],
    );
    const want = (await runInProcess(cluster.models.mobilenet, { image: tensor('float32', [1, 3, 224, 224], image) })).logits!
      .data as Float32Array;
    const handedTo = async (actor: string) => counter(cluster.url, 'troupe_http_handoffs_total', `actor="${actor}"`);
    await waitFor(
      'a connection handed to every replica',
      async () => {
        const answer = await nodeCall(cluster.url, 'POST', '/v2/models/cnn/infer', {
          ...request,
          headers: { ...request.headers, connection: 'close' },
        });
        assert.equal(answer.status, 200, answer.body.toString());
        assertClose(
          floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))),
          want,
          'a replica chosen at load',
        );
        for (const a of d.actors) if ((await handedTo(a.name)) === 0) return false;
        return true;
      },
      60_000,
    );
    // The same spec again keeps the replicas the head chose: nothing restarts.
    const again = await client.update({ name: 'cnn', model: 'mobilenet.onnx' });
    assert.deepEqual(new Set(again.actors.map((a) => a.pid)), pids);
    // A head restart keeps the count chosen (the state file holds it) and adopts the same processes.
    await cluster.restartHead();
    const after = await connect(cluster.url);
    try {
      const kept = await waitFor(
        'the replicas chosen at load READY again under the new head',
        async () => {
          const v = (await after.describe()).deployments.find((x) => x.name === 'cnn');
          return v && v.actors.filter((a) => a.state === 'READY').length === cores ? v : undefined;
        },
        60_000,
      );
      assert.deepEqual(new Set(kept.actors.map((a) => a.pid)), pids);
      const same = await after.update({ name: 'cnn', model: 'mobilenet.onnx' });
      assert.deepEqual(new Set(same.actors.map((a) => a.pid)), pids, 'the same spec after the restart changes nothing');
    } finally {
      await after.close();
    }
    // The suite's first client reconnects in the background, with back-off (up to 2 s a try), and
    // makes no retries: used before it is back, a call fails with TROUPE_ERR_CONNECTION_CLOSED (as
    // this and the two tests after it did on a loaded machine).
    await waitFor('the first client connected to the new head', () => client.connected, 30_000);
    // An update of the same model that needs new replicas starts as many as were chosen.
    const updated = await client.update({ name: 'cnn', model: 'mobilenet.onnx', batch: { maxSize: 2 } });
    assert.equal(updated.actors.filter((a) => a.state === 'READY').length, cores);
    assert.ok(
      updated.actors.every((a) => !pids.has(a.pid)),
      'new replicas for the new batching',
    );
    // A count named wins: one replica, which takes the cores in sessions of its own.
    const named = await client.update({ name: 'cnn', model: 'mobilenet.onnx', replicas: 1 });
    assert.equal(named.actors.length, 1);
    assert.equal(named.actors[0]!.layout!.instances, cores);
    assert.equal(named.actors[0]!.layout!.replicasWanted, undefined);
    await client.undeploy('cnn');
  });

  test(
    'replicas chosen at load take only what fits: beside a model holding a CPU, the rest are not started',
    { skip: availableParallelism() < 2 ? 'one core: one replica is all it asks' : false },
    async () => {
      const cores = Math.min(16, availableParallelism());
      // One CPU held by the MLP: the costly model gets the cores left.
      await client.deploy({ name: 'mlp', model: 'mlp.onnx' });
      const d = await client.deploy({ name: 'cnn', model: 'mobilenet.onnx' });
      assert.equal(d.actors.length, cores - 1);
      const described = await view(client, 'cnn');
      assert.match(described.layout!.reason, new RegExp(`the head runs ${cores - 1} of the ${cores} asked: the rest did not fit`));
      await client.undeploy('cnn');
    },
  );

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
    assert.match(
      two.layout!.chosen,
      /^2 replicas x 1 instance x 1 thread, batches of up to 64 rows, spinning 0.2 ms when idle, HTTP through the front-door workers$/,
    );
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
