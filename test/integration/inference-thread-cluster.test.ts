import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * Actors whose sessions run on an inference thread (TROUPE_INFERENCE_THREAD=always, passed from
 * the agent's environment to its actors) serve the SDK and HTTP with the in-process session's
 * outputs, and still form batches from the calls that arrive while the model is busy.
 */
describe('actors with an inference thread', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '16']], env: { TROUPE_INFERENCE_THREAD: 'always' } });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a burst of 64 calls over the SDK forms batches, each caller gets its own rows, and HTTP answers the same', async () => {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 8 } });
    const inputs = Array.from({ length: 64 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 2000 + i)));
    const results = await Promise.all(inputs.map((x) => client.run('mlp', { x })));
    const expected = await runInProcess(cluster.models.mlp, {
      x: tensor('float32', [64, 64], Float32Array.from(inputs.flatMap((t) => [...(t.data as Float32Array)]))),
    });
    const all = expected.logits!.data as Float32Array;
    results.forEach((r, i) => {
      const mine = r.logits!.data as Float32Array;
      for (let k = 0; k < 10; k++) {
        const want = all[i * 10 + k]!;
        assert.ok(Math.abs(mine[k]! - want) <= 1e-5 * Math.max(1, Math.abs(want)), `call ${i} logit ${k}: ${mine[k]} vs ${want}`);
      }
    });
    const [actor] = await waitFor(
      'the actor stats to report 64 calls',
      async () => {
        const actors: ActorView[] = (await client.describe()).deployments.find((d) => d.name === 'mlp')?.actors ?? [];
        return actors[0]?.stats?.calls === 64 ? actors : undefined;
      },
      10_000,
    );
    assert.ok(actor!.stats!.batches < 64, `expected batches larger than 1, got ${actor!.stats!.batches} runs for 64 calls`);

    const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: [...(inputs[3]!.data as Float32Array)] }] }),
    });
    assert.equal(answer.status, 200, answer.body.toString());
    const logits = (answer.json as { outputs: { name: string; data: number[] }[] }).outputs.find((o) => o.name === 'logits')!.data;
    logits.forEach((v, k) => assert.ok(Math.abs(v - all[30 + k]!) <= 1e-5 * Math.max(1, Math.abs(all[30 + k]!)), `HTTP logit ${k}`));
  });
});
