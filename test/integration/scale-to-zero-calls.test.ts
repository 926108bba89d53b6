import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { floatsOf, assertClose, mlpBinaryRequest } from '../helpers/mlp-oip.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

async function actorsOf(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

const ZERO = { minReplicas: 0, maxReplicas: 2, targetPerReplica: 4, upDelayMs: 60_000, downDelayMs: 500 };

describe('scale to zero', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a deployment of zero replicas is accepted at once, starts nothing, and says it can serve', async () => {
    const view = await client.deploy({ name: 'cold', model: 'mlp.onnx', threads: 1, replicas: 0, autoscale: ZERO });
    assert.equal(view.actors.length, 0);
    const ready = await fetch(`${cluster.url}/v2/models/cold/ready`);
    assert.equal(ready.status, 200, await ready.text());
  });

  test('the first SDK call to a scaled-down deployment waits for a replica (without the up delay) and answers right', async () => {
    const x = seededFloats(64, 5);
    const wanted = await runInProcess(cluster.models.mlp, { x: tensor('float32', [1, 64], x) });
    const out = await client.run('cold', { x: tensor('float32', [1, 64], x) }, { timeoutMs: 30_000 });
    assertClose(out.logits!.data as Float32Array, wanted.logits!.data as Float32Array, 'cold start answer');
    const events = (await client.describe()).events.filter((e) => e.kind === 'scaled' && e.message.startsWith('cold:'));
    assert.ok(
      events.some((e) => /cold: 0 -> 1 replicas/.test(e.message)),
      JSON.stringify(events),
    );
  });

  test('idle past downDelayMs, it scales back to zero replicas and stops their processes', async () => {
    await waitFor('cold to scale to zero', async () => (await actorsOf(client, 'cold')).length === 0 || undefined, 30_000);
  });

  test('the first HTTP call after scaling to zero waits for a replica too', async () => {
    const x = seededFloats(64, 6);
    const wanted = await runInProcess(cluster.models.mlp, { x: tensor('float32', [1, 64], x) });
    const { body, headers } = mlpBinaryRequest(x, 1);
    const res = await fetch(`${cluster.url}/v2/models/cold/infer`, { method: 'POST', body, headers });
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(res.status, 200, new TextDecoder().decode(bytes));
    const jsonLength = Number(res.headers.get('inference-header-content-length'));
    assertClose(floatsOf(bytes.subarray(jsonLength)), wanted.logits!.data as Float32Array, 'HTTP cold start answer');
  });

  test('the first HTTP call ever, before any replica has described the model, waits for one and is checked then', async () => {
    await client.deploy({ name: 'cold-http', model: 'mlp.onnx', threads: 1, replicas: 0, autoscale: ZERO });
    const x = seededFloats(64, 8);
    const wanted = await runInProcess(cluster.models.mlp, { x: tensor('float32', [1, 64], x) });
    const { body, headers } = mlpBinaryRequest(x, 1);
    const res = await fetch(`${cluster.url}/v2/models/cold-http/infer`, { method: 'POST', body, headers });
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.equal(res.status, 200, new TextDecoder().decode(bytes));
    const jsonLength = Number(res.headers.get('inference-header-content-length'));
    assertClose(floatsOf(bytes.subarray(jsonLength)), wanted.logits!.data as Float32Array, 'first HTTP answer');
    await waitFor('cold-http to scale to zero', async () => (await actorsOf(client, 'cold-http')).length === 0 || undefined, 30_000);
    // Known now, the model's inputs are checked before anything starts.
    const bad = await fetch(`${cluster.url}/v2/models/cold-http/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'y', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] }),
    });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: string }).error, /unknown input 'y'/);
    assert.equal((await actorsOf(client, 'cold-http')).length, 0, 'a refused call started no replica');
  });

  test('a cold call whose deadline passes before a replica is READY fails with TROUPE_ERR_DEADLINE_EXCEEDED saying why', async () => {
    // 9 CPUs cannot be had on an 8-CPU node: the replica started for the call stays PENDING.
    await client.deploy({ name: 'cold-big', model: 'mlp.onnx', threads: 1, cpus: 9, replicas: 0, autoscale: ZERO });
    const started = Date.now();
    await assert.rejects(
      async () => client.run('cold-big', { x: tensor('float32', [1, 64], seededFloats(64, 7)) }, { timeoutMs: 1500 }),
      (err: unknown) =>
        err instanceof TroupeError &&
        err.code === 'TROUPE_ERR_DEADLINE_EXCEEDED' &&
        /no replica of 'cold-big' was READY within \d+ ms of the call \(cold-big#0 PENDING: needs 9 CPUs/.test(err.message),
    );
    assert.ok(Date.now() - started < 30_000);
  });

  test('a call to a deployment at zero whose model does not load fails at once with MODEL_LOAD, and the next starts wait (back-off)', async () => {
    // Named .onnx, but onnxruntime cannot load it: only the replica started for the call finds out.
    await writeFile(join(cluster.modelDir, 'cold-broken.onnx'), 'this is not an onnx model');
    await client.deploy({ name: 'cold-broken', model: 'cold-broken.onnx', threads: 1, replicas: 0, autoscale: ZERO });
    const x = { x: tensor('float32', [1, 64], seededFloats(64, 8)) };
    await assert.rejects(
      async () => client.run('cold-broken', x, { timeoutMs: 30_000 }),
      (err: unknown) =>
        err instanceof TroupeError && err.code === 'TROUPE_ERR_MODEL_LOAD' && /keeps its previous spec \(0 replica/.test(err.message),
    );
    // While the back-off lasts, a call fails at once with the same cause, and starts nothing.
    await assert.rejects(
      async () => client.run('cold-broken', x, { timeoutMs: 30_000 }),
      (err: unknown) =>
        err instanceof TroupeError &&
        err.code === 'TROUPE_ERR_MODEL_LOAD' &&
        /the next start of a replica is tried in \d+ s/.test(err.message),
    );
    const scaled = (await client.describe()).events.filter((e) => e.kind === 'scaled' && e.message.startsWith('cold-broken:'));
    assert.equal(scaled.length, 1, JSON.stringify(scaled));
    await client.undeploy('cold-broken');
  });
});
