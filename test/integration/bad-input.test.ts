import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Packr } from 'msgpackr';
import { WebSocket } from 'ws';
import { connect, decodeFrame, encodeFrame, tensor, toWire } from '../../runtime/internal.js';
import type { Cluster, ErrorCode } from '../../runtime/internal.js';
import { isAlive, startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { rejectsWith } from '../helpers/graphs.js';
import { seededFloats } from '../helpers/tensors.js';

/** A raw WebSocket to the head's client endpoint, for frames the SDK would never send. */
class RawClient {
  readonly ws: WebSocket;
  readonly #queue: unknown[] = [];
  #wake: (() => void) | undefined;

  constructor(url: string) {
    this.ws = new WebSocket(new URL('/v1/client', url.replace('http', 'ws')));
    this.ws.on('message', (data: Buffer) => {
      this.#queue.push(...decodeFrame(data));
      this.#wake?.();
    });
  }

  opened(): Promise<void> {
    return new Promise((resolve, reject) => (this.ws.once('open', () => resolve()), this.ws.once('error', reject)));
  }

  async next(timeoutMs = 5000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    while (this.#queue.length === 0) {
      if (Date.now() > deadline) throw new Error('no answer from the head');
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 50);
      });
    }
    return this.#queue.shift() as Record<string, unknown>;
  }
}

describe('bad input gets a clear TROUPE_ERR_* and nothing breaks', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let actorPid: number;
  const good = () => ({ x: tensor('float32', [1, 64], seededFloats(64, 1)) });

  before(async () => {
    cluster = await startCluster();
    client = await connect(cluster.url);
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    actorPid = view.actors[0]!.pid!;
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('unknown deployment', async () => {
    await rejectsWith(client.run('nope', good()), 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /no deployment named 'nope' \(deployed: 'mlp'\)/);
  });

  test('unknown input name', async () => {
    await rejectsWith(client.run('mlp', { y: good().x }), 'TROUPE_ERR_BAD_INPUT', /unknown input 'y': model 'mlp' takes 'x'/);
  });

  test('missing input', async () => {
    await rejectsWith(client.run('mlp', {}), 'TROUPE_ERR_BAD_INPUT', /missing input 'x' \(float32\[N,64\]\)/);
  });

  test('wrong dtype', async () => {
    const x = tensor('int32', [1, 64], new Int32Array(64));
    await rejectsWith(client.run('mlp', { x }), 'TROUPE_ERR_BAD_INPUT', /input 'x': expected float32\[N,64\], got int32\[1,64\]/);
  });

  test('wrong shape', async () => {
    const x = tensor('float32', [1, 63], new Float32Array(63));
    await rejectsWith(client.run('mlp', { x }), 'TROUPE_ERR_BAD_INPUT', /input 'x': expected float32\[N,64\], got float32\[1,63\]/);
    const rank = tensor('float32', [64], new Float32Array(64));
    await rejectsWith(client.run('mlp', { x: rank }), 'TROUPE_ERR_BAD_INPUT', /expected float32\[N,64\], got float32\[64\]/);
  });

  test('unknown output name', async () => {
    await rejectsWith(
      client.run('mlp', good(), { outputs: ['probs'] }),
      'TROUPE_ERR_BAD_INPUT',
      /unknown output 'probs': model 'mlp' has 'logits'/,
    );
  });

  test('tensor data length that contradicts its shape (checked by the SDK and by the head)', () => {
    assert.throws(() => tensor('float32', [2, 64], new Float32Array(64)), /float32\[2,64\] holds 128 elements, data has 64/);
  });

  test('bad deployment specs', async () => {
    await rejectsWith(
      client.deploy({ name: 'esc', model: '../etc/passwd' }),
      'TROUPE_ERR_MODEL_PATH',
      /outside the agent's model directory/,
    );
    await rejectsWith(client.deploy({ name: 'gone', model: 'missing.onnx' }), 'TROUPE_ERR_MODEL_PATH', /model 'missing.onnx' not found/);
    await writeFile(join(cluster.modelDir, 'junk.onnx'), 'this is not an onnx model');
    await rejectsWith(client.deploy({ name: 'junk', model: 'junk.onnx' }), 'TROUPE_ERR_MODEL_LOAD', /cannot load .*junk\.onnx/);
    await rejectsWith(client.deploy({ name: 'bad name!', model: 'mlp.onnx' }), 'TROUPE_ERR_BAD_SPEC', /name/);
    await rejectsWith(client.deploy({ name: 'neg', model: 'mlp.onnx', replicas: -1 }), 'TROUPE_ERR_BAD_SPEC', /replicas/);
    await rejectsWith(
      client.deploy({ name: 'frac', model: 'mlp.onnx', gpus: 1.5 }),
      'TROUPE_ERR_BAD_SPEC',
      /gpus above 1 must be a whole number/,
    );
    // Resources are counted in thousandths, so a finer share is refused rather than rounded unseen.
    await rejectsWith(
      client.deploy({ name: 'fine', model: 'mlp.onnx', cpus: 0.1005 }),
      'TROUPE_ERR_BAD_SPEC',
      /cpus: must have at most 3 decimals/,
    );
  });

  test('malformed frames on the WebSocket each get an error; the same socket then serves a valid call', async () => {
    const raw = new RawClient(cluster.url);
    await raw.opened();
    const expectFail = async (code: ErrorCode, message: RegExp, id: string | null = null) => {
      const answer = await raw.next();
      assert.equal(answer.type, 'fail');
      assert.equal(answer.id, id);
      const error = answer.error as { code: string; message: string };
      assert.equal(error.code, code, error.message);
      assert.match(error.message, message);
    };

    raw.ws.send('{"type":"run"}');
    await expectFail('TROUPE_ERR_BAD_FRAME', /text frames are not accepted/);
    raw.ws.send(Buffer.from([0xc1, 0xff, 0x00, 0x13]));
    await expectFail('TROUPE_ERR_BAD_FRAME', /not valid msgpack/);
    raw.ws.send(new Packr({ useRecords: false }).pack({ type: 'run' }));
    await expectFail('TROUPE_ERR_BAD_FRAME', /must be a msgpack array/);
    raw.ws.send(encodeFrame([{ type: 'launch-missiles', id: 'a1' }]));
    await expectFail('TROUPE_ERR_BAD_MESSAGE', /message 'launch-missiles' is invalid/, 'a1');
    raw.ws.send(encodeFrame([{ type: 'run', id: 'a2', deployment: 'mlp' }]));
    await expectFail('TROUPE_ERR_BAD_MESSAGE', /at 'inputs'/, 'a2');
    raw.ws.send(
      encodeFrame([
        { type: 'run', id: 'a3', deployment: 'mlp', inputs: { x: { dtype: 'float99', shape: [1, 64], data: new Uint8Array(256) } } },
      ]),
    );
    await expectFail('TROUPE_ERR_BAD_MESSAGE', /inputs\.x\.dtype/, 'a3');
    const short = { dtype: 'float32', shape: [1, 64], data: new Uint8Array(252) };
    raw.ws.send(encodeFrame([{ type: 'run', id: 'a4', deployment: 'mlp', inputs: { x: short } }]));
    await expectFail('TROUPE_ERR_BAD_TENSOR', /input 'x': float32\[1,64\] needs 256 bytes, got 252/, 'a4');
    const negative = { dtype: 'float32', shape: [-1, 64], data: new Uint8Array(0) };
    raw.ws.send(encodeFrame([{ type: 'run', id: 'a5', deployment: 'mlp', inputs: { x: negative } }]));
    await expectFail('TROUPE_ERR_BAD_TENSOR', /dims must be integers >= 0/, 'a5');
    raw.ws.send(encodeFrame([{ type: 'run', id: 'a6', deployment: 'mlp', inputs: { x: { ...short, shape: [1.5, 64] } } }]));
    await expectFail('TROUPE_ERR_BAD_TENSOR', /dims must be integers/, 'a6');

    raw.ws.send(encodeFrame([{ type: 'run', id: 'ok', deployment: 'mlp', inputs: { x: toWire(good().x) } }]));
    const answer = await raw.next();
    assert.equal(answer.type, 'reply', JSON.stringify(answer));
    assert.equal(answer.id, 'ok');
    raw.ws.close();
  });

  test('after all of it the head and actor are the same processes, and a valid call succeeds', async () => {
    assert.ok(isAlive(actorPid));
    const view = await client.describe();
    const actor = view.deployments.find((d) => d.name === 'mlp')!.actors[0]!;
    assert.equal(actor.pid, actorPid);
    assert.equal(actor.restarts, 0);
    const out = await client.run('mlp', good());
    assert.deepEqual(out.logits!.shape, [1, 10]);
  });
});
