import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Packr } from 'msgpackr';
import { connect, encodeFrame, tensor, toWire } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import { RawStream } from '../helpers/raw-stream.js';
import { routesOf } from '../helpers/routes.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * SDK clients send runs of model deployments straight to a replica (two process hops instead of
 * four); the head says where the replicas are, keeps counting, and still serves everything else.
 */
describe('direct calls from the SDK to replicas', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let viaHead: Cluster;
  const x = tensor('float32', [2, 64], seededFloats(2 * 64, 5));

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    viaHead = await connect(cluster.url, { direct: false });
    await client.deploy({ name: 'm', model: 'member11.onnx', threads: 1, batch: { maxSize: 8 } });
  });
  after(async () => {
    await client?.close();
    await viaHead?.close();
    await cluster?.stop();
  });

  const okCount = async () => (await client.describe()).deployments.find((d) => d.name === 'm')!.requests.ok;

  test('once its routes are known a run goes straight to a replica, with the right rows, and the head still counts it', async () => {
    // The first run goes through the head while the client asks where the replicas are.
    await waitFor('a run sent directly', async () => {
      const f = client.run('m', { x });
      await f;
      return f.resolvedHere || undefined;
    });
    const want = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x });
    const before = await okCount();
    const futures = Array.from({ length: 20 }, () => client.run('m', { x }));
    assert.ok(
      futures.every((f) => f.resolvedHere),
      'all sent directly',
    );
    for (const f of futures) assert.deepEqual(floats((await f).logits), floats(want.logits));
    // Actors report their direct calls about once a second; the deployment's count takes them.
    await waitFor('the head to count the direct calls', async () => (await okCount()) >= before + 20 || undefined, 10_000);
    const head = viaHead.run('m', { x });
    assert.equal(head.resolvedHere, false, 'direct: false sends through the head');
    assert.deepEqual(floats((await head).logits), floats(want.logits));
  });

  test("runs through the head arrive in pooled frames, 16 at a time with bad ones among them: each answer is its own run's", async () => {
    // 320 rows of 64 floats: 80 KB runs, each sent in a turn of its own so that it is a frame of
    // its own, which the head reads into a buffer from its pool and gives back once the run has
    // succeeded; a buffer given back too soon (while its run waits in a queue or a socket) would
    // be overwritten by a later run's bytes and mix runs' numbers here.
    const rows = 320;
    const inputs = Array.from({ length: 48 }, (_, i) => tensor('float32', [rows, 64], seededFloats(rows * 64, 200 + i)));
    const expected = await Promise.all(inputs.map(async (t) => floats((await client.run('m', { x: t })).logits)));
    const answers: number[][] = [];
    let next = 0;
    const sender = async () => {
      for (let i = next++; i < inputs.length; i = next++) {
        await new Promise((resolve) => setImmediate(resolve));
        // Every fourth run has rows of the wrong width: refused by the head, its frame not reused.
        if (i % 4 === 3) {
          const wrong = tensor('float32', [rows * 2, 32], inputs[i]!.data);
          await rejectsWith(
            viaHead.run('m', { x: wrong }),
            'TROUPE_ERR_BAD_INPUT',
            /input 'x': expected float32\[\w+,64\], got float32\[640,32\]/,
          );
          continue;
        }
        const run = viaHead.run('m', { x: inputs[i]! });
        assert.equal(run.resolvedHere, false);
        answers[i] = floats((await run).logits);
      }
    };
    await Promise.all(Array.from({ length: 16 }, sender));
    for (let i = 0; i < inputs.length; i++) if (i % 4 !== 3) assert.deepEqual(answers[i], expected[i], `run ${i}`);
  });

  test('the routes follow the deployment: after a redeploy the next direct run is answered by the new model', async () => {
    await client.update({ name: 'm', model: 'member12.onnx', threads: 1, batch: { maxSize: 8 } });
    const want = await runInProcess(join(cluster.modelDir, 'member12.onnx'), { x });
    // The old replica left the routes before the deploy was answered: no run reaches it again.
    for (let i = 0; i < 5; i++) assert.deepEqual(floats((await client.run('m', { x })).logits), floats(want.logits));
    const direct = await waitFor('a direct run to the new replica', async () => {
      const f = client.run('m', { x });
      return f.resolvedHere ? await f : undefined;
    });
    assert.deepEqual(floats(direct.logits), floats(want.logits));
  });

  test('futures of direct runs are resolved by the client: chained runs get the right values, and a failed one its error', async () => {
    await client.deploy({ name: 'link', model: 'link21.onnx', threads: 1 });
    await waitFor('link to be called directly', async () => {
      const f = client.run('link', { x });
      await f;
      return f.resolvedHere || undefined;
    });
    const first = client.run('link', { x });
    const second = client.run('m', { x: first.output('logits') });
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const b = await runInProcess(join(cluster.modelDir, 'member12.onnx'), { x: a.logits! });
    assert.deepEqual(floats((await second).logits), floats(b.logits));
    const bad = client.run('link', { x: tensor('float32', [1, 3], new Float32Array(3)) });
    await rejectsWith(
      client.run('m', { x: bad }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x' comes from run '\w+', which failed: input 'x': expected float32\[N,64\]/,
    );
  });

  test('a replica checks direct calls as the head does, refuses strangers and bad frames, and keeps serving', async () => {
    await rejectsWith(client.run('m', { y: x }), 'TROUPE_ERR_BAD_INPUT', /'y'/);
    await rejectsWith(
      client.run('m', { x: tensor('float32', [1, 63], new Float32Array(63)) }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x': expected float32\[N,64\]/,
    );
    const routes = await routesOf(cluster.url, 'm');
    assert.equal(routes.replicas.length, 1);
    const [replica] = routes.replicas;
    assert.match(replica!.url, /^tcp:\/\/127\.0\.0\.1:\d+$/, 'listens on the address its node reaches the head from');
    const codeOf = (m: Record<string, unknown> | undefined) => (m?.type === 'fail' ? (m.error as { code: string }).code : m?.type);
    const bounded = (p: Promise<void>) =>
      Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error('connection not closed')), 10_000))]);

    // No hello: a call is refused and the connection closed.
    const stranger = new RawStream(replica!.url);
    await stranger.opened;
    stranger.send(encodeFrame([{ type: 'call', id: 'c0', inputs: { x: toWire(x) } }]));
    assert.equal(codeOf(await stranger.answerTo('c0')), 'TROUPE_ERR_UNAUTHORIZED');
    await bounded(stranger.closed);
    // A wrong token: the same.
    const wrong = new RawStream(replica!.url);
    await wrong.opened;
    const refused = await wrong.hello('x'.repeat(32));
    assert.equal(codeOf(refused), 'TROUPE_ERR_UNAUTHORIZED');
    assert.match((refused!.error as { message: string }).message, /wrong token/);
    await bounded(wrong.closed);
    // Before its hello a connection may not make the replica hold a large frame.
    const big = new RawStream(replica!.url);
    await big.opened;
    big.send(Buffer.alloc(1 << 20));
    await bounded(big.closed);
    assert.equal(codeOf(big.received[0]), 'TROUPE_ERR_BAD_FRAME');
    assert.match((big.received[0]!.error as { message: string }).message, /over the limit/);

    // With the token: malformed frames and messages are answered one by one, and the stream goes on.
    const raw = new RawStream(replica!.url);
    await raw.opened;
    assert.equal(codeOf(await raw.hello(replica!.token)), 'reply');
    raw.send(Buffer.from([0xc1, 0xff, 0x00]));
    raw.send(new Packr({ useRecords: false }).pack({ type: 'call' }));
    raw.send(encodeFrame([{ type: 'run', id: 'not-a-call' }]));
    raw.send(encodeFrame([{ type: 'call', id: 'c1', inputs: { x: { dtype: 'float32', shape: [1, 64], data: new Uint8Array(7) } } }]));
    raw.send(encodeFrame([{ type: 'hello', id: 'again', token: replica!.token }]));
    raw.send(encodeFrame([{ type: 'call', id: 'c2', inputs: { x: toWire(x) } }]));
    await raw.answerTo('c2');
    assert.deepEqual(raw.received.slice(1).map(codeOf), [
      'TROUPE_ERR_BAD_FRAME',
      'TROUPE_ERR_BAD_FRAME',
      'TROUPE_ERR_BAD_MESSAGE',
      'TROUPE_ERR_BAD_TENSOR',
      'TROUPE_ERR_BAD_MESSAGE',
      'reply',
    ]);
    const want = await runInProcess(join(cluster.modelDir, 'member12.onnx'), { x });
    const reply = raw.received.at(-1) as { value: { outputs: { logits: { data: Uint8Array } } } };
    assert.deepEqual(
      [...new Float32Array(Uint8Array.from(reply.value.outputs.logits.data).buffer)],
      floats(want.logits),
      'the call after them is served right',
    );
    // An empty frame breaks the framing: the replica says so and closes that connection only.
    raw.sendRaw(Buffer.alloc(4));
    await bounded(raw.closed);
    assert.equal(codeOf(raw.received.at(-1)), 'TROUPE_ERR_BAD_FRAME');
    const actor = (await client.describe()).deployments.find((d) => d.name === 'm')!.actors[0]!;
    assert.ok(actor.pid && isAlive(actor.pid));
    assert.equal(actor.restarts, 0, 'the replica never crashed');
    assert.ok(client.run('m', { x }).resolvedHere);
  });
});
