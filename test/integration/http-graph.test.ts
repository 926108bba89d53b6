import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, ensemble, model, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('HTTP: a graph deployed from its JSON form', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'g1', '--cpus', '8']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('PUT /api/v1/deployments/{name} with a graph document deploys the graph and its models; the graph then runs', async () => {
    const doc = JSON.stringify(
      ensemble('pair', [model('left', { path: 'mlp.onnx', threads: 1 }), model('right', { path: 'mlp.onnx', threads: 1 })], {
        combine: 'mean',
      }),
    );
    const wrongName = await call(cluster.url, 'PUT', '/api/v1/deployments/other', {
      body: doc,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(wrongName.status, 400);
    assert.match(JSON.stringify(wrongName.json), /the body is graph 'pair' but the path names 'other'/);

    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/pair', { body: doc, headers: { 'content-type': 'application/json' } });
    assert.equal(put.status, 201, JSON.stringify(put.json));
    const again = await call(cluster.url, 'PUT', '/api/v1/deployments/pair', {
      body: doc,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(again.status, 200, 'deploying the same graph again changes nothing');

    const x = tensor('float32', [2, 64], seededFloats(128, 4));
    const out = await client.run('pair', { x });
    const local = await runInProcess(cluster.models.mlp, { x });
    // Both members are the same model, so their mean is the model's own output.
    const got = [...(out.logits!.data as Float32Array)];
    const want = [...(local.logits!.data as Float32Array)];
    got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) <= 1e-6 * Math.max(1, Math.abs(want[i]!)), `logit ${i}: ${v} vs ${want[i]}`));
    assert.deepEqual((await client.describe()).deployments.map((d) => d.name).sort(), ['left', 'right']);
  });
});
