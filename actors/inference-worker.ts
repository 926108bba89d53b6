import { parentPort, workerData } from 'node:worker_threads';
import { toWireError } from '../runtime/internal.js';
import type { FromInferenceThread, InferenceThreadStart, ToInferenceThread } from './inference-thread-messages.js';
import { moveOutputs, tensorsOf } from './moved-tensors.js';
import { OnnxModel } from './onnx-model.js';

/**
 * The inference thread of a model actor (see actors/threaded-model.ts). onnxruntime-node's
 * `session.run` blocks the thread that calls it for the whole inference, so the session lives
 * here: while it runs, the actor's main thread keeps reading sockets, parsing requests and
 * forming the next batch. Runs come one at a time (the main thread's batcher sends the next only
 * after this one answered), each with its inputs moved in and its outputs moved back.
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
  port.on('message', (message: ToInferenceThread) => {
    if (message.type === 'release') {
      void model.release().finally(() => {
        post({ type: 'released' });
        port.close();
      });
      return;
    }
    const inputs = tensorsOf(message.inputs);
    const buffers = Object.values(message.inputs).flatMap((t) => (t.data instanceof ArrayBuffer ? [t.data] : []));
    model.run(inputs, message.outputs).then(
      (outputs) => {
        const { moved, transfer } = moveOutputs(outputs, new Set(buffers));
        post({ type: 'result', id: message.id, outputs: moved, inputs: buffers }, [...transfer, ...buffers]);
      },
      (err: unknown) => post({ type: 'failed', id: message.id, error: toWireError(err), inputs: buffers }, buffers),
    );
  });
}

void main();
