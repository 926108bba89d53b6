import assert from 'node:assert/strict';
import { Session } from 'node:inspector/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { INFERENCE_THREAD_MIN_RUN_MS, loadModel } from '../../actors/load-model.js';
import { OnnxModel } from '../../actors/onnx-model.js';
import { ThreadedModel } from '../../actors/threaded-model.js';
import { writeExampleModels } from '../../models/index.js';
import type { ExampleModelPaths } from '../../models/index.js';
import { tensor } from '../../runtime/internal.js';
import type { TroupeError } from '../../runtime/internal.js';
import type { Tensor } from '../../runtime/internal.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * The inference thread (actors/threaded-model.ts, actors/inference-worker.ts) with real
 * onnxruntime sessions on a real worker thread: its outputs are the in-process session's, byte
 * for byte; an onnxruntime error fails one run and leaves the thread serving; the thread's death
 * fails the runs in it and every later one with TROUPE_ERR_ACTOR_DIED and tells the actor.
 */

const bytes = (t: Tensor | undefined) =>
  Buffer.from((t!.data as Float32Array).buffer, (t!.data as Float32Array).byteOffset, (t!.data as Float32Array).byteLength);

/**
 * Makes the inference thread exit (code 7) when its next message arrives, through the
 * inspector of this process: the fault is injected into the real thread, and the answer to the
 * evaluation comes back before the test goes on, so nothing races.
 */
async function exitOnNextMessage(): Promise<() => void> {
  const session = new Session();
  session.connect();
  const attached = new Promise<string>((resolve) =>
    session.once('NodeWorker.attachedToWorker', (m) => resolve((m.params as { sessionId: string }).sessionId)),
  );
  await session.post('NodeWorker.enable', { waitForDebuggerOnStart: false });
  const sessionId = await attached;
  const evaluated = new Promise<{ exceptionDetails?: unknown }>((resolve) =>
    session.on('NodeWorker.receivedMessageFromWorker', (m) => {
      const answer = JSON.parse((m.params as { message: string }).message) as { id?: number; result: { exceptionDetails?: unknown } };
      if (answer.id === 1) resolve(answer.result);
    }),
  );
  // Listeners run in order: the thread's own handler starts the run (onnxruntime begins on the
  // next turn), then this one ends the thread in the same turn, so the run is in it when it dies.
  const expression = "process.getBuiltinModule('node:worker_threads').parentPort.on('message', () => process.exit(7)), true";
  await session.post('NodeWorker.sendMessageToWorker', {
    sessionId,
    message: JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression } }),
  });
  const result = await evaluated;
  assert.equal(result.exceptionDetails, undefined, `the fault was not injected: ${JSON.stringify(result.exceptionDetails)}`);
  return () => session.disconnect();
}

describe('the inference thread', { timeout: 120_000 }, () => {
  let dir: string;
  let models: ExampleModelPaths;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-thread-'));
    models = await writeExampleModels(dir);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('gives the same outputs as the session in this thread, byte for byte, and leaves the inputs as they were', async () => {
    for (const [file, name, shape] of [
      [models.mlp, 'x', [5, 64]],
      [models.mobilenet, 'image', [2, 3, 224, 224]],
    ] as const) {
      const inThread = await OnnxModel.load(file, { device: 'cpu', threads: 1 });
      const threaded = await ThreadedModel.load(file, { device: 'cpu', threads: 1 });
      try {
        assert.deepEqual(threaded.metadata, inThread.metadata);
        assert.equal(threaded.provider, 'cpu');
        const count = shape.reduce((a, b) => a * b, 1);
        // A view into the middle of a larger buffer, as a call's input is a view of its frame.
        const frame = new Float32Array(count + 16);
        frame.set(seededFloats(count, 3), 8);
        const x = tensor('float32', [...shape], frame.subarray(8, 8 + count));
        const expected = await inThread.run({ [name]: x });
        // Several runs in a row: the input buffers that come back are reused for the next ones.
        for (let i = 0; i < 3; i++) {
          const got = await threaded.run({ [name]: x });
          assert.deepEqual(Object.keys(got), Object.keys(expected));
          for (const out of Object.keys(expected)) {
            assert.deepEqual(got[out]!.shape, expected[out]!.shape);
            assert.ok(bytes(got[out]).equals(bytes(expected[out])), `${path.basename(file)} output '${out}' differs`);
          }
        }
        assert.equal(frame.buffer.byteLength, (count + 16) * 4, "the caller's buffer was not moved away");
        assert.deepEqual(frame.subarray(8, 8 + count), seededFloats(count, 3));
      } finally {
        await Promise.all([inThread.release(), threaded.release()]);
      }
    }
  });

  test('runGoingOn gives the end of the run in the thread (health pings wait for it), and nothing when idle', async () => {
    const threaded = await ThreadedModel.load(models.mobilenet, { device: 'cpu', threads: 1 });
    try {
      assert.equal(threaded.runGoingOn(), undefined);
      let done = false;
      const run = threaded.run({ image: tensor('float32', [1, 3, 224, 224], seededFloats(3 * 224 * 224, 5)) }).then(() => (done = true));
      const going = threaded.runGoingOn();
      assert.ok(going, 'a run is going on');
      await going;
      await run;
      assert.ok(done);
      assert.equal(threaded.runGoingOn(), undefined);
    } finally {
      await threaded.release();
    }
  });

  test('an onnxruntime error fails that run with TROUPE_ERR_INFERENCE and the thread serves the next', async () => {
    const threaded = await ThreadedModel.load(models.mlp, { device: 'cpu', threads: 1 });
    try {
      await assert.rejects(threaded.run({ x: tensor('float32', [1, 63], seededFloats(63, 1)) }), (err: TroupeError) => {
        assert.equal(err.code, 'TROUPE_ERR_INFERENCE');
        assert.match(err.message, /onnxruntime: .*dimension/i);
        return true;
      });
      const ok = await threaded.run({ x: tensor('float32', [1, 64], seededFloats(64, 1)) });
      assert.deepEqual(Object.values(ok)[0]!.shape[0], 1);
    } finally {
      await threaded.release();
    }
  });

  test("the thread's death fails its runs and every later one with TROUPE_ERR_ACTOR_DIED and tells the actor once", async () => {
    const deaths: TroupeError[] = [];
    const threaded = await ThreadedModel.load(models.mlp, { device: 'cpu', threads: 1 }, (err) => deaths.push(err));
    const disconnect = await exitOnNextMessage();
    try {
      const x = { x: tensor('float32', [1, 64], seededFloats(64, 1)) };
      const isDeath = (err: TroupeError) => {
        assert.equal(err.code, 'TROUPE_ERR_ACTOR_DIED');
        assert.match(err.message, /inference thread of this actor exited with code 7; the actor restarts/);
        return true;
      };
      // Both are in the thread (or on their way) when it exits on the first.
      await Promise.all([assert.rejects(threaded.run(x), isDeath), assert.rejects(threaded.run(x), isDeath)]);
      await assert.rejects(threaded.run(x), isDeath);
      assert.equal(deaths.length, 1);
      assert.equal(deaths[0]!.code, 'TROUPE_ERR_ACTOR_DIED');
    } finally {
      disconnect();
      await threaded.release();
    }
  });

  test('auto mode gives a thread to a model with 2 intra-op threads that runs long enough, not to the tiny MLP nor to 1 intra-op thread', async () => {
    const mlp = await loadModel(models.mlp, { device: 'cpu', threads: 2 }, 'auto');
    const cnn = await loadModel(models.mobilenet, { device: 'cpu', threads: 2 }, 'auto');
    const single = await loadModel(models.mobilenet, { device: 'cpu', threads: 1 }, 'auto');
    try {
      assert.equal(mlp.threaded, false, `the MLP ran in ${mlp.runMs} ms`);
      assert.ok(mlp.runMs! < INFERENCE_THREAD_MIN_RUN_MS);
      assert.ok(mlp.model instanceof OnnxModel);
      assert.equal(cnn.threaded, true, `MobileNet ran in ${cnn.runMs} ms`);
      assert.ok(cnn.model instanceof ThreadedModel);
      assert.equal(single.threaded, false);
      assert.ok(single.model instanceof OnnxModel);
      const forced = await loadModel(models.mlp, { device: 'cpu', threads: 1 }, 'always');
      assert.equal(forced.threaded, true);
      await (forced.model as ThreadedModel).release();
    } finally {
      await (mlp.model as OnnxModel).release();
      await (cnn.model as ThreadedModel).release();
      await (single.model as OnnxModel).release();
    }
  });

  test('a model that fails to load on the thread fails with TROUPE_ERR_MODEL_LOAD and leaves no thread behind', async () => {
    await assert.rejects(ThreadedModel.load(path.join(dir, 'missing.onnx'), { device: 'cpu' }), (err: TroupeError) => {
      assert.equal(err.code, 'TROUPE_ERR_MODEL_LOAD');
      assert.match(err.message, /missing\.onnx/);
      return true;
    });
  });
});
