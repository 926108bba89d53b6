import assert from 'node:assert/strict';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, encodeFrame, sharedMemoryAddon, tensor, toWire } from '../../runtime/internal.js';
import type { Cluster, Tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats, writeGraphModels } from '../helpers/graphs.js';
import { RawStream } from '../helpers/raw-stream.js';
import { routesOf } from '../helpers/routes.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/** 320 rows of 64 floats: 80 KiB, over the 64 KiB from which inputs go through shared memory. */
const ROWS = 320;
const CALLS = 64;

/** `count` distinct inputs and what onnxruntime alone answers for each, from one run over all their rows. */
async function inputsAndAnswers(modelPath: string, count: number, seed: number): Promise<{ inputs: Tensor[]; answers: number[][] }> {
  const all = seededFloats(count * ROWS * 64, seed);
  const inputs = Array.from({ length: count }, (_, i) => tensor('float32', [ROWS, 64], all.slice(i * ROWS * 64, (i + 1) * ROWS * 64)));
  const logits = floats((await runInProcess(modelPath, { x: tensor('float32', [count * ROWS, 64], all) })).logits);
  const answers = Array.from({ length: count }, (_, i) => logits.slice(i * ROWS * 10, (i + 1) * ROWS * 10));
  return { inputs, answers };
}

/** Sends every input at once and checks each answer is its own input's, row for row. */
async function checkBurst(client: Cluster, inputs: Tensor[], answers: number[][]): Promise<void> {
  const futures = inputs.map((x) => client.run('m', { x }));
  assert.ok(
    futures.every((f) => f.resolvedHere),
    'sent straight to the replicas',
  );
  const got = await Promise.all(futures);
  got.forEach((outputs, i) => assert.deepEqual(floats(outputs.logits), answers[i], `call ${i} got its own rows`));
}

/** Sends runs until they go straight to a replica (the first ones go through the head while routes are asked for). */
async function untilDirect(client: Cluster, x: Tensor): Promise<void> {
  await waitFor('runs sent directly', async () => {
    const f = client.run('m', { x });
    await f;
    return f.resolvedHere || undefined;
  });
}

/**
 * A client on the host of the replicas it calls puts large inputs in shared memory (memfds the
 * replica maps) instead of their frames; only where the addon is built (scripts/build-native.mjs,
 * which `.ci/run` makes sure of by installing a C compiler).
 */
describe('large inputs through shared memory', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let framed: Cluster;
  let data: { inputs: Tensor[]; answers: number[][] };

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    framed = await connect(cluster.url, { sharedMemory: false });
    await client.deploy({ name: 'm', model: 'member11.onnx', replicas: 2, threads: 1, batch: { maxSize: 8, maxDelayMs: 2 } });
    data = await inputsAndAnswers(join(cluster.modelDir, 'member11.onnx'), CALLS, 7);
  });
  after(async () => {
    await client?.close();
    await framed?.close();
    await cluster?.stop();
  });

  test('the addon is built here', () => {
    const addon = sharedMemoryAddon();
    assert.notEqual(typeof addon, 'string', `shared memory is off on this machine: ${String(addon)}`);
    assert.equal(client.sharedMemory.off, undefined);
  });

  test('bursts of 64 calls to two batching replicas: inputs go through shared memory, each caller gets its own rows, and slots are reused', async () => {
    await untilDirect(client, data.inputs[0]!);
    // The first call needing a region goes in its frame while each replica maps the region.
    await waitFor('both replicas to map the region', async () => {
      const before = client.sharedMemory.tensors;
      await Promise.all(data.inputs.slice(0, 16).map((x) => client.run('m', { x })));
      return client.sharedMemory.tensors - before === 16 || undefined;
    });
    const start = client.sharedMemory;
    for (let round = 0; round < 3; round++) await checkBurst(client, data.inputs, data.answers);
    const end = client.sharedMemory;
    assert.equal(end.tensors - start.tensors, 3 * CALLS, 'every input of every burst went through shared memory');
    // At most 2 x 16 calls are in flight at once, each holding a 128 KiB slot until its answer:
    // one region of 256 such slots serves every burst.
    assert.equal(end.regions, 1, 'slots are given back and reused');
    assert.equal(end.bytes, start.bytes);
  });

  test('a client with sharedMemory: false sends the same calls in frames, and gets the same answers', async () => {
    assert.match(framed.sharedMemory.off ?? '', /sharedMemory: false/);
    await untilDirect(framed, data.inputs[0]!);
    await checkBurst(framed, data.inputs, data.answers);
    assert.equal(framed.sharedMemory.tensors, 0);
  });

  test('a replica refuses regions it cannot map and references outside its regions, answers each, and keeps serving', async () => {
    const addon = sharedMemoryAddon();
    assert.ok(typeof addon !== 'string', String(addon));
    const [replica] = (await routesOf(cluster.url, 'm')).replicas;
    const raw = new RawStream(replica!.url);
    await raw.opened;
    assert.equal((await raw.hello(replica!.token))?.type, 'reply');
    const answer = async (message: Record<string, unknown>) => {
      raw.send(encodeFrame([message]));
      const m = await raw.answerTo(message.id as string);
      return m?.type === 'fail' ? `${(m.error as { code: string }).code}: ${(m.error as { message: string }).message}` : m?.type;
    };
    // A real region of this process, its nonce in its first bytes, and one input in its first slot.
    const region = addon.create(64 + 128 * 1024);
    const view = new Uint8Array(region.buffer);
    const nonce = 'n'.repeat(22);
    view.set(Buffer.from(nonce, 'latin1'));
    const x = data.inputs[3]!;
    view.set(toWire(x).data as Uint8Array, 64);
    const offer = { type: 'region', region: 0, pid: process.pid, fd: region.fd, bytes: region.buffer.byteLength, nonce };

    // A file is not a region: a peer could truncate it under the mapping.
    const file = openSync(join(cluster.modelDir, 'member11.onnx'), 'r');
    assert.match(
      String(await answer({ ...offer, id: 'o1', fd: file })),
      /^TROUPE_ERR_SHARED_MEMORY: cannot map region 0: \/proc\/\d+\/fd\/\d+ is not a region sealed against shrinking/,
    );
    closeSync(file);
    assert.match(
      String(await answer({ ...offer, id: 'o2', pid: 2 ** 30 })),
      /^TROUPE_ERR_SHARED_MEMORY: cannot map region 0: \/proc\/1073741824\/fd\/\d+: No such file or directory/,
    );
    assert.match(String(await answer({ ...offer, id: 'o3', bytes: region.buffer.byteLength * 2 })), /smaller than offered/);
    assert.match(
      String(await answer({ ...offer, id: 'o4', nonce: 'm'.repeat(22) })),
      /not the offering client's region \(its nonce differs\)/,
    );
    assert.equal(await answer({ ...offer, id: 'o5' }), 'reply');
    assert.match(String(await answer({ ...offer, id: 'o6' })), /cannot map region 0: it is mapped already/);

    const ref = { dtype: 'float32', shape: [ROWS, 64], region: 0, offset: 64, bytes: ROWS * 64 * 4 };
    const call = (id: string, x: Record<string, unknown>) => answer({ type: 'call', id, inputs: { x } });
    assert.match(
      String(await call('c1', { ...ref, region: 7 })),
      /^TROUPE_ERR_SHARED_MEMORY: input 'x' names region 7, which this connection has not mapped/,
    );
    assert.match(
      String(await call('c2', { ...ref, offset: 64 + 64 * 1024 })),
      /^TROUPE_ERR_SHARED_MEMORY: input 'x': bytes 65600\.\.147520 are outside region 0 \(slots span 64\.\.131136\)/,
    );
    assert.match(String(await call('c3', { ...ref, offset: 0 })), /outside region 0/);
    assert.match(
      String(await call('c4', { ...ref, bytes: 100 })),
      /^TROUPE_ERR_BAD_TENSOR: input 'x': float32\[320,64\] needs 81920 bytes, got 100/,
    );
    assert.match(
      String(await call('c5', { ...ref, shape: [ROWS, 63], bytes: ROWS * 63 * 4 })),
      /^TROUPE_ERR_BAD_INPUT: .*input 'x': expected float32\[N,64\]/,
    );
    assert.match(String(await call('c6', { dtype: 'float32', shape: [ROWS, 64], offset: 64 })), /^TROUPE_ERR_BAD_MESSAGE/);
    // The good reference is read where this process wrote it.
    assert.equal(await call('c7', ref), 'reply');
    const reply = raw.received.find((m) => m.id === 'c7') as { value: { outputs: { logits: { data: Uint8Array } } } };
    assert.deepEqual([...new Float32Array(Uint8Array.from(reply.value.outputs.logits.data).buffer)], data.answers[3]);
    assert.deepEqual(raw.problems, []);
    raw.close();
    // And the replica serves everyone else as before.
    await checkBurst(client, data.inputs.slice(0, 8), data.answers.slice(0, 8));
  });
});

describe('replicas without shared memory', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    // The actors (and head and agent) go without the addon; this test process keeps it.
    cluster = await startCluster({ agents: [GRAPH_AGENT], env: { TROUPE_SHARED_MEMORY: '0' } });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    await client.deploy({ name: 'm', model: 'member11.onnx', threads: 1, batch: { maxSize: 8, maxDelayMs: 2 } });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('refuse the region a client offers, and the client sends every input in frames from then on', async () => {
    const { inputs, answers } = await inputsAndAnswers(join(cluster.modelDir, 'member11.onnx'), 16, 9);
    await untilDirect(client, inputs[0]!);
    for (let round = 0; round < 3; round++) await checkBurst(client, inputs, answers);
    assert.equal(client.sharedMemory.off, undefined, 'this client could use shared memory');
    assert.equal(client.sharedMemory.tensors, 0, 'but the replica refused it, so nothing went through it');
  });
});
