import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import { GRAPH_MODEL_FILE } from '../runtime/internal.js';
import { GraphModel } from './graph-model.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';
import { ModelInstances } from './model-instances.js';
import { ThreadedModel } from './threaded-model.js';
import type { OnThreadDeath } from './threaded-model.js';

/** What an actor serves: one ONNX session, or a graph of them run in this process. */
export interface ServedModel {
  readonly metadata: ModelMetadata;
  /** The onnxruntime execution provider its sessions run on. */
  readonly provider: string;
  /** False when runs of several calls cannot be split back by rows (see graph-model.ts); else the metadata decides. */
  readonly batchable?: boolean;
  /** Runs it may hold at once (see BatcherOptions.overlap); 1 when absent. */
  readonly overlap?: number;
  /** Runs that go on at once, each on a session of its own (see BatcherOptions.runners); 1 when absent. */
  readonly runners?: number;
  /** Whether one of its sessions has no run now (see BatcherOptions.idleRunner). */
  idleRunner?(): boolean;
  /** `notAfter`: only for a model with `overlap` above 1 (see RunModel in actors/batcher.ts). */
  run(inputs: Record<string, Tensor>, outputs?: readonly string[], notAfter?: number): Promise<Record<string, Tensor>>;
  /** The end of the runs going on now, if any: a process told to stop lets them finish. */
  runGoingOn?(): Promise<unknown> | undefined;
}

/** Where a model's session runs: `auto` decides by its intra-op threads and measured run time (see {@link INFERENCE_THREAD_MIN_RUN_MS}). */
export type InferenceThreadMode = 'auto' | 'always' | 'never';

/**
 * A model whose lone call runs at least this long (ms, measured at load) gets a thread of its own,
 * if its session has more than one intra-op thread. Handing a run to the thread and its answer
 * back costs 0.02-0.2 ms and one copy of the inputs; a run of a millisecond or more is at least 5x
 * that (MobileNet: 5-6 ms an image), while the MLP's run (0.01-0.02 ms) is cheaper than the hop.
 * With one intra-op thread per replica, the other replicas already use the core a replica leaves
 * while it reads requests, and the thread only adds its costs: measured on 2 cores, MobileNet
 * over HTTP gained 0-10% with 1 replica x 2 threads (the SDK 27%) and moved -10% to +1% with 2 x 1
 * (docs/performance.md#the-inference-thread).
 */
export const INFERENCE_THREAD_MIN_RUN_MS = 1;

export interface LoadedModel {
  model: ServedModel;
  /** Whether its session runs on a thread of its own, and the run time that decided it (ms; absent when not measured). */
  threaded: boolean;
  runMs?: number;
}

/**
 * Loads and warms up the model file a deployment names: `*.graph.json` is a graph (its sessions in
 * this thread), anything else ONNX. In `auto` mode the session is created on an inference thread
 * first, so a large model loads once, where it will run; one that runs faster than the hop is
 * worth is let go and loaded again in this thread (a small model loads in milliseconds). More than
 * one instance are sessions on threads of their own but the last, on this thread; in `always` mode
 * every one on a thread (model-instances.ts).
 */
export async function loadModel(
  path: string,
  options: LoadOptions,
  mode: InferenceThreadMode = 'auto',
  onDeath?: OnThreadDeath,
  instances = 1,
): Promise<LoadedModel> {
  if (GRAPH_MODEL_FILE.test(path)) return { model: await GraphModel.load(path, options), threaded: false };
  if (instances > 1) {
    const pool = await ModelInstances.load(path, options, instances, onDeath, mode !== 'always');
    return { model: pool, threaded: true, runMs: pool.runMs };
  }
  if (mode === 'never') return { model: await OnnxModel.load(path, options), threaded: false };
  // Unset threads let onnxruntime use every core: more than one.
  if (mode === 'auto' && options.threads === 1) return { model: await OnnxModel.load(path, options), threaded: false };
  const threaded = await ThreadedModel.load(path, options, onDeath);
  if (mode === 'always' || threaded.runMs >= INFERENCE_THREAD_MIN_RUN_MS) return { model: threaded, threaded: true, runMs: threaded.runMs };
  await threaded.release();
  return { model: await OnnxModel.load(path, options), threaded: false, runMs: threaded.runMs };
}
