import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { Packr } from 'msgpackr';
import { RoutesSchema, connect, decodeFrame, encodeFrame, tensor, toWire } from '../../runtime/index.js';
import type { Cluster, Routes } from '../../runtime/index.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/** The routes the head hands a client for `deployment`, asked over a raw socket. */
async function routesOf(url: string, deployment: string): Promise<Routes> {
  const ws = new WebSocket(new URL('/v1/client', url.replace('http', 'ws')));
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const answer = new Promise<Record<string, unknown>>((resolve) => ws.once('message', (data: Buffer) => resolve(decodeFrame(data)[0] as Record<string, unknown>)));
  ws.send(encodeFrame([{ type: 'routes', id: 'r1', deployment }]));
  const reply = await answer;
  ws.close();
  return RoutesSchema.parse(reply.value);
}

/** Opens a raw socket to a replica's direct endpoint; resolves with it, or with the HTTP status it was refused with. */
function openDirect(url: string, token?: string): Promise<WebSocket | number> {
  const ws = new WebSocket(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('error', reject);
  });
}

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
    assert.ok(futures.every((f) => f.resolvedHere), 'all sent directly');
    for (const f of futures) assert.deepEqual(floats((await f).logits), floats(want.logits));
    // Actors report their direct calls about once a second; the deployment's count takes them.
    await waitFor('the head to count the direct calls', async () => (await okCount()) >= before + 20 || undefined, 10_000);
    const head = viaHead.run('m', { x });
    assert.equal(head.resolvedHere, false, 'direct: false sends through the head');
    assert.deepEqual(floats((await head).logits), floats(want.logits));
  });

  test('the routes follow the deployment: after a redeploy the next direct run is answered by the new model', async () => {
    await client.deploy({ name: 'm', model: 'member12.onnx', threads: 1, batch: { maxSize: 8 } });
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
    await rejectsWith(client.run('m', { x: bad }), 'TROUPE_ERR_BAD_INPUT', /input 'x' comes from run '\w+', which failed: input 'x': expected float32\[N,64\]/);
  });

  test('a replica checks direct calls as the head does, refuses strangers and bad frames, and keeps serving', async () => {
    await rejectsWith(client.run('m', { y: x }), 'TROUPE_ERR_BAD_INPUT', /'y'/);
    await rejectsWith(client.run('m', { x: tensor('float32', [1, 63], new Float32Array(63)) }), 'TROUPE_ERR_BAD_INPUT', /input 'x': expected float32\[N,64\]/);
    const routes = await routesOf(cluster.url, 'm');
    assert.equal(routes.replicas.length, 1);
    const [replica] = routes.replicas;
    assert.match(replica!.url, /^ws:\/\/127\.0\.0\.1:\d+\/v1\/direct$/, 'listens on the address its node reaches the head from');
    assert.equal(await openDirect(replica!.url), 401, 'no token: refused');
    assert.equal(await openDirect(replica!.url, 'x'.repeat(32)), 401, 'wrong token: refused');
    const ws = await openDirect(replica!.url, replica!.token);
    assert.ok(ws instanceof WebSocket);
    const answers: Record<string, unknown>[] = [];
    ws.on('message', (data: Buffer) => answers.push(...(decodeFrame(data) as Record<string, unknown>[])));
    ws.send(Buffer.from([0xc1, 0xff, 0x00]));
    ws.send(new Packr({ useRecords: false }).pack({ type: 'call' }));
    ws.send(encodeFrame([{ type: 'run', id: 'not-a-call' }]));
    ws.send(encodeFrame([{ type: 'call', id: 'c1', inputs: { x: { dtype: 'float32', shape: [1, 64], data: new Uint8Array(7) } } }]));
    ws.send(encodeFrame([{ type: 'call', id: 'c2', inputs: { x: toWire(x) } }]));
    await waitFor('answers to all five frames', () => answers.length >= 5 || undefined, 10_000);
    ws.close();
    const codes = answers.map((m) => (m.type === 'fail' ? (m.error as { code: string }).code : 'reply'));
    assert.deepEqual(codes, ['TROUPE_ERR_BAD_FRAME', 'TROUPE_ERR_BAD_FRAME', 'TROUPE_ERR_BAD_MESSAGE', 'TROUPE_ERR_BAD_TENSOR', 'reply']);
    const actor = (await client.describe()).deployments.find((d) => d.name === 'm')!.actors[0]!;
    assert.ok(actor.pid && isAlive(actor.pid));
    assert.equal(actor.restarts, 0, 'the replica never crashed');
    assert.ok(client.run('m', { x }).resolvedHere);
  });
});
