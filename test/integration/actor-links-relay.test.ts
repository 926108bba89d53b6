import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { OnnxModel } from '../../actors/onnx-model.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { assertClose } from '../helpers/mlp-oip.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * Actor links relayed by the agent (`troupe agent --actor-links relay`): the head holds one
 * connection per node, and every actor's frames travel inside it. Real head, agent and actor
 * processes: calls the head sends (HTTP served by the head itself), a crash and its replacement,
 * and a head restart that adopts the running actor through the relay.
 */

/** troupe_actor_links by way, from the head's /metrics. */
async function links(url: string): Promise<{ agent: number; connection: number }> {
  const text = (await call(url, 'GET', '/metrics')).body.toString();
  const of = (via: string) => Number(new RegExp(`^troupe_actor_links\\{via="${via}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { agent: of('agent'), connection: of('connection') };
}

describe('actor links relayed by the agent', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let reference: OnnxModel;
  const x = seededFloats(64, 11);

  /** One inference over HTTP served by the head: it reaches the replica over the head's link to it. */
  async function inferThroughHead(): Promise<void> {
    const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(answer.status, 200, answer.body.toString());
    const expected = await reference.run({ x: tensor('float32', [1, 64], x) });
    const output = (answer.json as { outputs: { name: string; data: number[] }[] }).outputs.find((o) => o.name === 'logits')!;
    assertClose(output.data, expected.logits!.data as Float32Array, 'logits through the relayed link');
  }

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '0'], agents: [['--actor-links', 'relay']] });
    client = await connect(cluster.url);
    reference = await OnnxModel.load(path.join(cluster.modelDir, 'mlp.onnx'), { device: 'cpu', threads: 1 });
  });
  after(async () => {
    await reference?.release();
    await client?.close();
    await cluster?.stop();
  });

  test('a replica whose link its agent relays serves the head, and the head holds no connection of its own to it', async () => {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', cpus: 0.5, threads: 1 });
    await inferThroughHead();
    assert.deepEqual(await links(cluster.url), { agent: 1, connection: 0 });
    // The SDK calls the replica straight, as with direct links: only the link to the head is relayed.
    const answer = await client.run('mlp', { x: tensor('float32', [1, 64], x) });
    assertClose(
      answer.logits!.data as Float32Array,
      (await reference.run({ x: tensor('float32', [1, 64], x) })).logits!.data as Float32Array,
      'SDK',
    );
  });

  test('a killed replica is replaced, and the new one opens its link through the agent', async () => {
    const before = (await client.describe()).deployments.find((d) => d.name === 'mlp')!.actors[0]!.pid!;
    process.kill(before, 'SIGKILL');
    await waitFor(
      'a new READY replica',
      async () => {
        const actor = (await client.describe()).deployments.find((d) => d.name === 'mlp')?.actors[0];
        return actor?.state === 'READY' && actor.pid !== before;
      },
      60_000,
    );
    await inferThroughHead();
    assert.deepEqual(await links(cluster.url), { agent: 1, connection: 0 });
  });

  test('a restarted head adopts the running replica through the relay: same process, serving again', async () => {
    const pid = (await client.describe()).deployments.find((d) => d.name === 'mlp')!.actors[0]!.pid!;
    await cluster.restartHead('SIGKILL');
    await waitFor(
      'the replica READY under the new head',
      async () => {
        const fresh = await connect(cluster.url).catch(() => undefined);
        if (!fresh) return false;
        try {
          const actor = (await fresh.describe()).deployments.find((d) => d.name === 'mlp')?.actors[0];
          return actor?.state === 'READY' ? actor : false;
        } finally {
          await fresh.close();
        }
      },
      60_000,
    ).then((actor) => assert.equal(actor.pid, pid, 'the same process, adopted'));
    await inferThroughHead();
    assert.deepEqual(await links(cluster.url), { agent: 1, connection: 0 });
  });
});
