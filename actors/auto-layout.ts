import { statSync } from 'node:fs';
import { availableParallelism, freemem } from 'node:os';
import { DEFAULT_BATCH_MAX_SIZE, DEFAULT_IDLE_SPIN_MS, GRAPH_MODEL_FILE, MAX_INSTANCES } from '../runtime/internal.js';
import type { BatchSpec, ReplicaLayout } from '../runtime/internal.js';
import { INFERENCE_THREAD_MIN_RUN_MS, loadModel } from './load-model.js';
import type { InferenceThreadMode, ServedModel } from './load-model.js';
import { ModelInstances } from './model-instances.js';
import { OnnxModel } from './onnx-model.js';
import type { Device } from './onnx-model.js';
import type { OnThreadDeath } from './threaded-model.js';

/** Warm runs timed to measure a model's cost at load (the median counts), as the inference thread's choice does. */
const TIMED_RUNS = 3;

export interface LayoutAsked {
  device: Device;
  /** The deployment's intra-op threads (per instance), when it names the layout. */
  threads?: number;
  /** The deployment's instances (1 when it names none). */
  instances: number;
  /** Set when the deployment leaves the layout to the replica: its replica count. */
  autoReplicas?: number;
  /**
   * The head chooses the replica count at load (spec `autoReplicas`): a costly model then holds one
   * session on the main thread and asks for one replica per core (`replicasWanted`), where a
   * replica of a fixed count takes the host's cores in sessions on inference threads.
   */
  replicasChosenByHead?: boolean;
  /** The deployment's batching, when it names it. */
  batch?: BatchSpec;
  /** The deployment's idle spin (ms), when it names one. */
  idleSpinMs?: number;
  mode: InferenceThreadMode;
}

export interface LaidOutModel {
  model: ServedModel;
  layout: ReplicaLayout;
  /** The batching the replica runs with: the deployment's, or the one chosen here. */
  batch: BatchSpec;
}

/** The model file's size, or 0 when it cannot be read (then memory bounds nothing). */
function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Whether every input and output has a symbolic first dim: rows that can be batched (batch-options.ts). */
const batchable = (metadata: ServedModel['metadata']) =>
  [...metadata.inputs, ...metadata.outputs].every((t) => typeof t.shape[0] === 'string');

const ms = (n: number) => `${n < 0.1 ? n.toFixed(3) : n.toFixed(2)} ms`;

/**
 * Batching where the deployment names none. On a CPU a costly model's rows cost about as much run
 * together as one by one (MobileNet's floor on 2 cores: batch 1 best, bench/RESULTS-front-door.md),
 * so batching would only make calls wait for company; a cheap model's run is mostly fixed cost, which
 * a batch shares (the MLP: 64 rows a run serve 3x the calls of one), and a GPU's runs are wide.
 * A call that finds its replica idle runs at once either way (docs/batching.md).
 */
function defaultBatch(device: Device, runMs: number | undefined): { batch: BatchSpec; why: string } {
  const costly = runMs !== undefined && runMs >= INFERENCE_THREAD_MIN_RUN_MS;
  if (device === 'cpu' && costly)
    return { batch: { maxSize: 1, maxDelayMs: 0 }, why: 'batching off (on a CPU a costly run costs the same per row in a batch)' };
  return {
    batch: { maxSize: DEFAULT_BATCH_MAX_SIZE, maxDelayMs: 0 },
    why: `batches of up to ${DEFAULT_BATCH_MAX_SIZE} rows, a call that finds the replica idle runs at once (${device === 'cpu' ? 'a cheap run is mostly fixed cost, which a batch shares' : 'a GPU runs rows side by side'})`,
  };
}

/**
 * How long the replica keeps its event loop turning after its last call (actors/stay-awake.ts):
 * as the deployment names it, else DEFAULT_IDLE_SPIN_MS for a model measured cheap (a wake-up
 * from sleep then costs more than the run: docs/performance.md#idle-spin) and none for a costly
 * one, or one whose cost is unknown (a spinning core is then a cost with nothing to set against it).
 */
function idleSpin(asked: LayoutAsked, runMs: number | undefined): { ms: number; why: string } {
  if (asked.idleSpinMs !== undefined)
    return asked.idleSpinMs > 0
      ? { ms: asked.idleSpinMs, why: `it polls ${asked.idleSpinMs} ms for the next call after its last, as the deployment names it` }
      : { ms: 0, why: 'it sleeps at once when idle, as the deployment names it (idleSpinMs 0)' };
  if (runMs === undefined) return { ms: 0, why: 'it sleeps at once when idle (the cost of its run was not measured)' };
  if (runMs >= INFERENCE_THREAD_MIN_RUN_MS) return { ms: 0, why: 'it sleeps at once when idle (a wake-up is small beside a costly run)' };
  return {
    ms: DEFAULT_IDLE_SPIN_MS,
    why: `it polls ${DEFAULT_IDLE_SPIN_MS} ms for the next call after its last (a cheap run costs less than waking a sleeping process)`,
  };
}

/**
 * Loads the model in the layout its deployment names, or, where it names none (no threads,
 * instances or CPUs: `autoReplicas` set), in the fast layout for this host, as the benchmarks use
 * it: one session of one intra-op thread is loaded on this thread and its lone call timed; a model
 * that runs for INFERENCE_THREAD_MIN_RUN_MS or more on a CPU gets as many sessions of one thread as
 * this host's cores over the deployment's replicas (on 2 cores, 1 replica x 2 instances: 0.88x of
 * raw onnxruntime's best over HTTP, against 0.52x for one session of 2 threads, docs/performance.md),
 * the first one kept; a cheaper one stays one session on the main thread (a hop to a thread would
 * cost as much as its run). Where the head chooses the replica count too (`replicasChosenByHead`),
 * a costly model keeps its one session on the main thread instead and asks for one replica per
 * core (`replicasWanted`): processes of one session each serve HTTP faster than one process of
 * several (docs/performance.md#fast-by-default). The replica says what it chose and why in its
 * `ready` message.
 */
export async function loadWithLayout(path: string, asked: LayoutAsked, onDeath: OnThreadDeath): Promise<LaidOutModel> {
  if (asked.autoReplicas === undefined || GRAPH_MODEL_FILE.test(path) || asked.device !== 'cpu') {
    const threads = asked.threads ?? 1;
    const loaded = await loadModel(path, { device: asked.device, threads }, asked.mode, onDeath, asked.instances);
    // A session kept on this thread was not timed: its cost decides the batching and the idle spin left to the replica.
    if (loaded.runMs === undefined && (!asked.batch || asked.idleSpinMs === undefined) && loaded.model instanceof OnnxModel)
      loaded.runMs = await loaded.model.timeWarmRuns(TIMED_RUNS);
    const chosen = asked.batch
      ? { batch: asked.batch, why: 'batching as the deployment names it' }
      : GRAPH_MODEL_FILE.test(path)
        ? { batch: { maxSize: 1, maxDelayMs: 0 }, why: 'batching off (a graph file batches only when its deployment asks)' }
        : !batchable(loaded.model.metadata)
          ? { batch: { maxSize: 1, maxDelayMs: 0 }, why: 'batching off (its tensors have no batch axis)' }
          : defaultBatch(asked.device, loaded.runMs);
    const spin = idleSpin(asked, loaded.runMs);
    const runners = loaded.model.runners ?? 1;
    const how =
      asked.autoReplicas === undefined
        ? `${runners} instance${runners === 1 ? '' : 's'} x ${threads} thread${threads === 1 ? '' : 's'} as the deployment names them`
        : `on ${asked.device === 'cpu' ? 'a graph file' : 'a GPU'}: one session of one thread`;
    return {
      model: loaded.model,
      batch: chosen.batch,
      layout: {
        instances: runners,
        threads,
        batchMaxSize: chosen.batch.maxSize,
        inferenceThread: loaded.threaded,
        ...(loaded.runMs !== undefined ? { runMs: loaded.runMs } : {}),
        idleSpinMs: spin.ms,
        chosen: asked.autoReplicas === undefined ? 'spec' : 'auto',
        reason: `${how}; ${chosen.why}; ${spin.why}`,
      },
    };
  }
  const probe = await OnnxModel.load(path, { device: 'cpu', threads: 1 });
  let runMs: number;
  try {
    runMs = await probe.timeWarmRuns(TIMED_RUNS);
  } catch (err) {
    await probe.release();
    throw err;
  }
  const cores = availableParallelism();
  const replicas = Math.max(1, asked.autoReplicas);
  const costly = runMs >= INFERENCE_THREAD_MIN_RUN_MS;
  // Each session holds its own copy of the weights: no more than a quarter of the free memory goes to them.
  const byMemory = Math.max(1, Math.floor(freemem() / (4 * Math.max(1, fileBytes(path)))));
  const byCores = Math.max(1, Math.min(MAX_INSTANCES, Math.floor(cores / replicas)));
  const perCore = costly && asked.replicasChosenByHead === true;
  const instances = costly && !perCore ? Math.min(byCores, byMemory) : 1;
  // Each replica holds one session: as many replicas as cores (at most as many as one replica's
  // instances would be: each is a process of its own), and as a quarter of the free memory holds.
  const replicasWanted = perCore ? Math.max(1, Math.min(cores, MAX_INSTANCES, byMemory)) : undefined;
  const chosen = asked.batch
    ? { batch: asked.batch, why: 'batching as the deployment names it' }
    : batchable(probe.metadata)
      ? defaultBatch('cpu', runMs)
      : { batch: { maxSize: 1, maxDelayMs: 0 }, why: 'batching off (its tensors have no batch axis)' };
  let model: ServedModel = probe;
  let threaded = false;
  if (instances > 1) {
    model = await ModelInstances.load(path, { device: 'cpu', threads: 1 }, instances, onDeath, asked.mode !== 'always', probe);
    threaded = true;
  } else if (asked.mode === 'always') {
    await probe.release();
    model = (await loadModel(path, { device: 'cpu', threads: 1 }, 'always', onDeath)).model;
    threaded = true;
  }
  const spin = idleSpin(asked, runMs);
  const cost = `a lone call runs in ${ms(runMs)}`;
  let why = costly
    ? instances > 1
      ? `${cost} (costly: ${INFERENCE_THREAD_MIN_RUN_MS} ms or more), so ${instances} sessions of one thread, one per core of this host's ${cores} over ${replicas} replica${replicas === 1 ? '' : 's'}${instances < byCores ? `, as many as a quarter of the free memory holds` : ''}`
      : `${cost} (costly), one session of one thread: ${cores} core${cores === 1 ? '' : 's'} over ${replicas} replicas leave one each`
    : `${cost}, cheaper than a hop to an inference thread: one session of one thread on the main thread`;
  if (costly && instances === 1 && byMemory < byCores)
    why = `${cost} (costly), one session of one thread: a second would not fit a quarter of the free memory`;
  if (replicasWanted !== undefined)
    why = `${cost} (costly: ${INFERENCE_THREAD_MIN_RUN_MS} ms or more), so one session of one thread on the main thread per replica, and one replica per core of this host's ${cores}: ${replicasWanted} replica${replicasWanted === 1 ? '' : 's'} asked of the head${replicasWanted < Math.min(cores, MAX_INSTANCES) ? ', as many as a quarter of the free memory holds' : replicasWanted < cores ? ` (at most ${MAX_INSTANCES})` : ''}`;
  return {
    model,
    batch: chosen.batch,
    layout: {
      instances,
      threads: 1,
      batchMaxSize: chosen.batch.maxSize,
      inferenceThread: threaded,
      runMs,
      idleSpinMs: spin.ms,
      ...(replicasWanted !== undefined ? { replicasWanted } : {}),
      chosen: 'auto',
      reason: `${why}; ${chosen.why}; ${spin.why}`,
    },
  };
}
