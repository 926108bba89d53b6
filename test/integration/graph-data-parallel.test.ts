import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, dataParallel, model, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats, rejectsWith } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('graphs: data-parallel fan-out', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a batch cut into chunks (last one ragged) across two replicas equals one in-process run', async () => {
    const view = await client.deploy(dataParallel('bulk', model('mlp', { path: 'mlp.onnx', replicas: 2, threads: 1 }), { chunk: 16 }));
    assert.equal(view.kind, 'dataParallel');
    assert.deepEqual(view.inputs, [{ name: 'x', dtype: 'float32', shape: ['batch', 64] }]);
    const rows = 100; // 6 chunks of 16 and one of 4
    const x = tensor('float32', [rows, 64], seededFloats(rows * 64, 9));
    const future = client.run('bulk', { x }, { trace: true });
    const out = await future;
    const local = await runInProcess(cluster.models.mlp, { x });
    assert.deepEqual(out.logits!.shape, [rows, 10]);
    assert.deepEqual(floats(out.logits), floats(local.logits));

    const chunks = (await future.trace())!.filter((t) => t.step.startsWith('bulk > mlp['));
    assert.deepEqual(
      chunks.map((c) => c.rows).sort((a, b) => a! - b!),
      [4, 16, 16, 16, 16, 16, 16],
    );

    // Both replicas took chunks (the stats arrive about once a second, so wait for them).
    const calls = await waitFor('both replicas to report calls', async () => {
      const d = (await client.describe()).deployments.find((d) => d.name === 'mlp')!;
      const perActor = d.actors.map((a) => a.stats?.calls ?? 0);
      return perActor.reduce((a, b) => a + b, 0) >= 7 ? perActor : undefined;
    });
    assert.ok(
      calls.every((n) => n > 0),
      `every replica served chunks: ${calls.join(', ')}`,
    );
  });

  test('fewer rows than one chunk, and a batch that is not cut evenly, still come back in order', async () => {
    for (const rows of [1, 15, 33]) {
      const x = tensor('float32', [rows, 64], seededFloats(rows * 64, rows));
      const out = await client.run('bulk', { x });
      assert.deepEqual(floats(out.logits), floats((await runInProcess(cluster.models.mlp, { x })).logits), `${rows} rows`);
    }
  });

  test('a scalar input cannot be cut into chunks', async () => {
    await rejectsWith(
      client.run('bulk', { x: tensor('float32', [], new Float32Array(1)) }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x' is a scalar; there is no batch axis to cut/,
    );
  });
});
