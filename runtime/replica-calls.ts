import * as z from 'zod';

// What a deployment asks of how its replicas take calls: batching, and how long a replica polls
// for its next call before it sleeps. runtime/spec.ts re-exports all of it.

/** A model file that is a graph of models served by one actor (actors/graph-model.ts). */
export const GRAPH_MODEL_FILE = /\.graph\.json$/i;

/**
 * Dynamic batching: calls that wait while the replica is busy form the next batch, concatenated
 * along axis 0 into one `session.run`, outputs split back. A call that finds the replica idle
 * runs at once, so batching costs no latency at low load; unlike Triton's and Ray Serve's
 * batchers, nothing waits on a timer unless `waitWhenIdle` asks for it.
 */
export const BatchSchema = z
  .object({
    /** Most rows (sum of the calls' batch dims) in one run; 1 turns batching off. */
    maxSize: z.number().int().min(1).max(65_536),
    /** With `waitWhenIdle`, how long the first call of a batch may wait for more; unused without it. */
    maxDelayMs: z.number().min(0).max(60_000).default(0),
    /**
     * The first call of every batch, even one that finds the replica idle, waits up to
     * `maxDelayMs` for company or until the batch is full (Triton's and Ray Serve's policy):
     * fuller batches at low load, for up to `maxDelayMs` more latency. Off by default.
     */
    waitWhenIdle: z.boolean().optional(),
    /** Sizes to prefer: a batch stops growing at the largest preferred size it can reach. */
    preferredSizes: z.array(z.number().int().min(1).max(65_536)).max(32).optional(),
  })
  .strict();
export type BatchSpec = z.output<typeof BatchSchema>;

/**
 * Most rows a run when a deployment names no batching and its replicas batch (the benchmarks' size):
 * a call that finds its replica idle runs at once, so batching costs no latency at low load.
 */
export const DEFAULT_BATCH_MAX_SIZE = 64;

/**
 * How long a replica of a cheap model keeps its event loop turning after its last call, where the
 * deployment names no `idleSpinMs`: a process that went to sleep pays the wake-up, and a colder
 * cache, on the next call, which for a cheap model costs more than the run (docs/performance.md).
 */
export const DEFAULT_IDLE_SPIN_MS = 0.2;
/** The most a deployment may name: past a client's turnaround, spinning only burns a core. */
export const MAX_IDLE_SPIN_MS = 10;
/** A replica's idle spin (ms): off, or up to MAX_IDLE_SPIN_MS. */
export const IdleSpinSchema = z.number().min(0).max(MAX_IDLE_SPIN_MS);

type BatchedSpec = { batch?: BatchSpec | undefined; kind?: string | undefined; multiplex?: unknown; model: string };

/**
 * Whether a deployment that names no batching may batch: a model deployment of one ONNX file,
 * whose replica chooses at load (actors/auto-layout.ts). Graph files, multiplexed models, fn steps
 * and class actors run one call at a time unless told otherwise, as before.
 */
export function batchesByDefault(spec: BatchedSpec): boolean {
  return (spec.kind ?? 'model') === 'model' && !spec.multiplex && !GRAPH_MODEL_FILE.test(spec.model);
}

/** The most rows a replica of `spec` may put in one run: its batch's, or the most a replica may choose. */
export function batchMaxSizeOf(spec: BatchedSpec): number {
  return spec.batch?.maxSize ?? (batchesByDefault(spec) ? DEFAULT_BATCH_MAX_SIZE : 1);
}
