import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import { call, nodeCall } from '../helpers/http.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

// A cluster on a Node line without the internals runtime/node-internals.ts uses, as
// TROUPE_NODE_INTERNALS_OFF=all makes every process of it: each path those internals speed up still
// answers with onnxruntime's numbers. HTTP through the front door (the workers give each connection
// back to the head), HTTP with replicas serving it (no handoff then), gRPC (default windows), and the
// SDK's direct calls (frames read with copies).
describe('without Node internals: every path still serves', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const rows = 3;
  const x = seededFloats(rows * 64, 5);
  let want: Float32Array;

  before(async () => {
    cluster = await startCluster({
      headArgs: ['--http-workers', '1', '--http-handoff'],
      env: { TROUPE_NODE_INTERNALS_OFF: 'all' },
    });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1, cpus: 0.5 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    client = await connect(cluster.url);
    want = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [rows, 64], x) })).logits!.data as Float32Array;
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('HTTP inference on fresh and kept-alive connections', async () => {
    const { body, headers } = mlpBinaryRequest(x, rows);
    for (let i = 0; i < 3; i++) {
      const answer = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body, headers });
      assert.equal(answer.status, 200, answer.body.toString());
      assertClose(floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))), want, `HTTP call ${i}`);
    }
    // Neither a replica nor a worker served them: no handle could move, so the head did.
    const metrics = (await call(cluster.url, 'GET', '/metrics')).body.toString();
    const counted = (prefix: string) =>
      metrics
        .split('\n')
        .filter((l) => l.startsWith(prefix))
        .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    assert.equal(counted('troupe_http_handoffs_total'), 0, 'connections handed to replicas');
    assert.equal(counted('troupe_front_door_requests_total{model="mlp",outcome="ok"}'), 0, 'requests answered by workers');
  });

  test('gRPC inference', async () => {
    const grpc = grpcClient(cluster.grpcAddress);
    try {
      const answer = await grpc.call<{ raw_output_contents: Buffer[] }>('ModelInfer', {
        model_name: 'mlp',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64] }],
        raw_input_contents: [rawFloats(x)],
      });
      assertClose(floatsOfRaw(answer.raw_output_contents[0]!), want, 'gRPC');
    } finally {
      grpc.close();
    }
  });

  test("the SDK's calls, direct to the replica", async () => {
    const out = await client.run('mlp', { x: tensor('float32', [rows, 64], x) });
    assertClose(out.logits!.data as Float32Array, want, 'SDK');
  });
});
