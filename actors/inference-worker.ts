import { parentPort, workerData } from 'node:worker_threads';
import { toWireError } from '../runtime/internal.js';
import type { FromInferenceThread, InferenceThreadStart, RunMessage, ToInferenceThread } from './inference-thread-messages.js';
import { moveOutputs, tensorsOf } from './moved-tensors.js';
import { OnnxModel } from './onnx-model.js';

/**
 * The inference thread of a model actor (see actors/threaded-model.ts). onnxruntime-node's
 * `session.run` blocks the thread that calls it for the whole inference, so the session lives
 * here: while it runs, the actor's main thread keeps reading sockets, parsing requests and
 * forming the next batch. Runs are served one at a time, in order, each with its inputs moved in
 * and its outputs moved back; a full batch may be sent ahead and wait here for its turn.
 */
const port = parentPort!;
const start = workerData as InferenceThreadStart;

/** Warm runs timed after the warm-up, to decide whether a thread of its own pays (median of these). */
const TIMED_RUNS = 3;

function post(message: FromInferenceThread, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer);
}

async function main(): Promise<void> {
  let model: OnnxModel;
  let runMs: number;
  try {
    model = await OnnxModel.load(start.path, start.options);
    runMs = await model.timeWarmRuns(TIMED_RUNS);
  } catch (err) {
    post({ type: 'loadFailed', error: toWireError(err) });
    return;
  }
  post({ type: 'loaded', metadata: model.metadata, provider: model.provider, runMs });
  // Runs one at a time, in order: a run sent ahead waits here until the one before it has
  // ended, and its deadline is checked only then.
  const waiting: RunMessage[] = [];
  let busy = false;
  const serveWaiting = async () => {
    busy = true;
    for (let message = waiting.shift(); message; message = waiting.shift()) await serve(model, message);
    busy = false;
  };
  port.on('message', (message: ToInferenceThread) => {
    if (message.type === 'release') {
      void model.release().finally(() => {
        post({ type: 'released' });
        port.close();
      });
      return;
    }
    waiting.push(message);
    if (!busy) void serveWaiting();
  });
}

async function serve(model: OnnxModel, message: RunMessage): Promise<void> {
  const buffers = Object.values(message.inputs).flatMap((t) => (t.data instanceof ArrayBuffer ? [t.data] : []));
  if (message.notAfter !== undefined && performance.timeOrigin + performance.now() > message.notAfter) {
    post({ type: 'skipped', id: message.id, inputs: buffers }, buffers);
    return;
  }
  try {
    const outputs = await model.run(tensorsOf(message.inputs), message.outputs);
    const { moved, transfer } = moveOutputs(outputs, new Set(buffers));
    post({ type: 'result', id: message.id, outputs: moved, inputs: buffers }, [...transfer, ...buffers]);
  } catch (err) {
    post({ type: 'failed', id: message.id, error: toWireError(err), inputs: buffers }, buffers);
  }
}

void main();
