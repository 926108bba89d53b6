import type { DType, ModelMetadata, WireError } from '../runtime/internal.js';
import type { LoadOptions } from './onnx-model.js';

/**
 * The messages between an actor's main thread and its inference thread (actors/threaded-model.ts,
 * actors/inference-worker.ts): tagged unions, one per direction, with the run's id. Both ends are
 * this package's code in one process, so they are typed, not validated: nothing here crossed a
 * trust boundary (the main thread checked every call's tensors before it queued them).
 */

/** What the thread is started with (`workerData`). */
export interface InferenceThreadStart {
  path: string;
  options: LoadOptions;
}

/**
 * A tensor crossing between the threads. Numeric data is an ArrayBuffer of its own, moved (in the
 * transfer list), not copied: onnxruntime-node takes no SharedArrayBuffer, so an input is copied
 * once into such a buffer on the main thread, and the buffer comes back with the answer for reuse.
 */
export interface MovedTensor {
  dtype: DType;
  shape: number[];
  /** The tensor's bytes begin at offset 0 and run `byteLength` bytes (the buffer may be larger: a pool's size class). */
  data: ArrayBuffer | string[];
  byteLength: number;
}

/**
 * A run. `notAfter`: for a run sent ahead while another runs, the earliest deadline of its calls
 * (ms since the epoch, `performance.timeOrigin` based): past it when its turn comes, it is not run.
 */
export interface RunMessage {
  type: 'run';
  id: number;
  inputs: Record<string, MovedTensor>;
  outputs: readonly string[] | undefined;
  notAfter?: number | undefined;
}

export type ToInferenceThread = RunMessage | { type: 'release' };

export type FromInferenceThread =
  /** The session loaded and warmed up; `runMs`: the median of a few more warm runs at the declared shape (symbolic dims 1). */
  | { type: 'loaded'; metadata: ModelMetadata; provider: string; runMs: number }
  | { type: 'loadFailed'; error: WireError }
  /** `inputs`: the input buffers handed back for reuse (none an output also lives in). */
  | { type: 'result'; id: number; outputs: Record<string, MovedTensor>; inputs: ArrayBuffer[] }
  | { type: 'failed'; id: number; error: WireError; inputs: ArrayBuffer[] }
  /** Not run: its `notAfter` had passed when its turn came. */
  | { type: 'skipped'; id: number; inputs: ArrayBuffer[] }
  | { type: 'released' };
