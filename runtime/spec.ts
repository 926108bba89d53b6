import * as z from 'zod';
import { MethodNameSchema, NameSchema } from './protocol/common.js';
import { isMilliAmount } from './resources.js';
import { toWireValue } from './protocol/values.js';
import { ConcurrencyGroupsSchema, MAX_CONCURRENCY } from './concurrency-groups.js';
import { BatchSchema, GRAPH_MODEL_FILE, IdleSpinSchema } from './replica-calls.js';

// How a replica takes its calls (batching, idle spin) is a file of its own; named here too, where callers have always found it.
export {
  BatchSchema,
  DEFAULT_BATCH_MAX_SIZE,
  DEFAULT_IDLE_SPIN_MS,
  GRAPH_MODEL_FILE,
  IdleSpinSchema,
  MAX_IDLE_SPIN_MS,
  batchMaxSizeOf,
  batchesByDefault,
} from './replica-calls.js';
export type { BatchSpec } from './replica-calls.js';

const UNITS: Record<string, number> = { '': 1, k: 1e3, m: 1e6, g: 1e9, t: 1e12, ki: 2 ** 10, mi: 2 ** 20, gi: 2 ** 30, ti: 2 ** 40 };

/** '512Mi' -> 536870912; plain numbers are bytes. */
function toBytes(value: number | string, ctx: z.RefinementCtx): number {
  if (typeof value === 'number') return value;
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$/i.exec(value);
  const scale = match ? UNITS[(match[2] ?? '').toLowerCase()] : undefined;
  if (!match || scale === undefined) {
    ctx.addIssue({ code: 'custom', message: `'${value}' is not a size: use bytes or a unit such as 512Mi, 2Gi, 1.5GB` });
    return z.NEVER;
  }
  return Math.round(Number(match[1]) * scale);
}

/** Autoscaling on load: queued plus in-flight calls per replica, with hysteresis delays. */
export const AutoscaleSchema = z
  .object({
    minReplicas: z.number().int().min(0).max(256),
    maxReplicas: z.number().int().min(1).max(256),
    /** Queued + in-flight calls per replica to aim for. */
    targetPerReplica: z.number().positive().max(1_000_000).default(2),
    /** Load must stay above target this long before scaling up, below it this long before scaling down. */
    upDelayMs: z.number().int().min(0).max(3_600_000).default(2000),
    downDelayMs: z.number().int().min(0).max(3_600_000).default(30_000),
  })
  .strict();
export type AutoscaleSpec = z.output<typeof AutoscaleSchema>;

/** One class name per index of a classification output; Triton's label file, one line each. */
export const LabelListSchema = z.array(z.string().max(1024, 'a label is at most 1024 characters')).max(1_000_000);

/**
 * A label file beside the model (Triton's `label_filename`): a path relative to the model's folder
 * under the agents' --model-dir, one label per line, read by each replica as it loads the model.
 */
export const LabelFileSchema = z
  .string()
  .min(1)
  .max(255)
  .refine((f) => !f.startsWith('/') && !f.includes('\\') && !f.split('/').includes('..'), {
    message: "a label file is named relative to the model's folder, without '..'",
  });

/**
 * Class labels for the HTTP API's classification extension ("score:index:label"): one list, or
 * one label file, for every output; or a list or a file per output name, as Triton's
 * `label_filename` is given per output.
 */
export const LabelsSchema = z.union([
  LabelListSchema,
  LabelFileSchema,
  z.record(z.string().min(1).max(256), z.union([LabelListSchema, LabelFileSchema])),
]);
export type DeploymentLabels = z.infer<typeof LabelsSchema>;

/**
 * One version of a deployment that splits its traffic (canary rollouts): its own model and replicas
 * (the deployment's by default), and the percentage of calls it takes.
 */
export const VersionSchema = z
  .object({
    /** Names the version in URLs (`/v2/models/{name}/versions/{version}`) and its replicas' deployment (`{name}.{version}`). */
    version: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,15}$/, 'a version is 1-16 letters, digits, "_" or "-", starting with a letter or digit'),
    model: z.string().min(1).max(1024),
    /** Percent of the deployment's calls; the versions' weights sum to 100. 0 keeps a version warm without traffic. */
    weight: z.number().min(0).max(100),
    replicas: z.number().int().min(0).max(256).optional(),
  })
  .strict();
export type VersionSpec = z.output<typeof VersionSchema>;

/**
 * Many models per replica (Ray Serve's model multiplexing): the deployment's `model` is a directory
 * under the agents' model directory and each `*.onnx` in it a model of the set, called by its file
 * name without `.onnx`. A replica loads a model on its first call and keeps at most `maxModels`
 * (and, when given, `maxModelMemory` bytes of model files), evicting the least recently used.
 * Each replica lists the directory again every `pollIntervalMs` (2000 when not given): new files
 * are served, changed ones reloaded on their next call, removed ones refused (docs/multiplexing.md).
 */
export const MultiplexSchema = z
  .object({
    maxModels: z.number().int().min(1).max(1024).default(4),
    pollIntervalMs: z.number().int().min(100).max(3_600_000).optional(),
    maxModelMemory: z.union([z.number().int().positive(), z.string()]).transform(toBytes).optional(),
  })
  .strict();
export type MultiplexSpec = z.output<typeof MultiplexSchema>;

/** The most bytes a class actor's constructor arguments may take as JSON: they travel in its process's environment. */
export const MAX_CLASS_ARGS_BYTES = 64 * 1024;

/** A class actor's constructor arguments: JSON values, so every entry point (SDK, HTTP, CLI) can give them. */
export const ClassArgsSchema = z
  .array(z.unknown())
  .max(64)
  .superRefine((args, ctx) => {
    // First: the JSON round trip below recurses, and a deep value would overflow the stack.
    try {
      toWireValue(args, 'args');
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `args cannot be sent: ${(err as Error).message}` });
      return;
    }
    let text: string | undefined;
    try {
      text = JSON.stringify(args);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `args are not JSON values: ${(err as Error).message}` });
      return;
    }
    if (text.length > MAX_CLASS_ARGS_BYTES)
      ctx.addIssue({ code: 'custom', message: `args take ${text.length} bytes as JSON, more than ${MAX_CLASS_ARGS_BYTES}` });
    else if (!sameJson(args, JSON.parse(text) as unknown))
      ctx.addIssue({
        code: 'custom',
        message: 'args are not plain JSON values (functions, undefined, NaN, dates or class instances change on the way)',
      });
  });

/** Whether `a` survives a JSON round trip unchanged as `b` (plain objects, arrays, finite numbers, strings, booleans, null). */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === null || typeof a !== 'object') return Object.is(a, b) || (typeof a === 'number' && a === b);
  if (b === null || typeof b !== 'object') return false;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  if (Object.getPrototypeOf(a) !== Object.prototype || Array.isArray(b)) return false;
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  );
}

/** Labels as classification reads them: the files replaced by their lines. */
export const ClassLabelsSchema = z.union([LabelListSchema, z.record(z.string().min(1).max(256), LabelListSchema)]);
export type ClassLabels = z.infer<typeof ClassLabelsSchema>;

/** The key of a label file that serves every output (`labels: "labels.txt"`). */
export const EVERY_OUTPUT = '';

/** The label files a spec names, by output ({@link EVERY_OUTPUT} for one file for all), or undefined when it names none. */
export function labelFilesOf(labels: DeploymentLabels | undefined): Record<string, string> | undefined {
  if (labels === undefined || Array.isArray(labels)) return undefined;
  if (typeof labels === 'string') return { [EVERY_OUTPUT]: labels };
  const files = Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string');
  return files.length > 0 ? Object.fromEntries(files) : undefined;
}

/**
 * The spec's labels with each file replaced by the lines a replica read from it (`read`, keyed
 * as {@link labelFilesOf}); a file not read yet (no replica READY) leaves its output without labels.
 */
export function classLabels(
  labels: DeploymentLabels | undefined,
  read: Record<string, string[]> | null | undefined,
): ClassLabels | undefined {
  if (labels === undefined || Array.isArray(labels)) return labels;
  if (typeof labels === 'string') return read?.[EVERY_OUTPUT];
  const lists = Object.entries(labels).flatMap(([output, l]): [string, string[]][] => {
    const list = typeof l === 'string' ? read?.[output] : l;
    return list ? [[output, list]] : [];
  });
  return Object.fromEntries(lists);
}

/** CPUs and GPUs are counted in thousandths (runtime/resources.ts), so a spec names no finer share. */
const MILLI_MESSAGE = 'must have at most 3 decimals (resources are counted in thousandths)';

/** The smallest `cpus` a replica may ask for: a twentieth of a core, so 20 replicas per CPU at most. */
export const MIN_REPLICA_CPUS = 0.05;
/** The most restarts (maxRestarts) or call retries (maxTaskRetries) a spec may name; -1 is without end. */
export const MAX_RESTARTS = 10_000;
// Beside the groups it bounds (concurrency-groups.ts); named here too, where callers have always found it.
export { MAX_CONCURRENCY };
/** Most model instances one replica holds (each a session and a thread: an inference thread, or the main thread for one). */
export const MAX_INSTANCES = 16;

/**
 * Whether a deployment leaves room for the head to choose its replica count at load: a model of one
 * ONNX file whose layout its replicas choose (no threads, instances or CPUs but the default named)
 * and whose count nothing else sets (autoscale, versions, multiplexing; a version's own deployment
 * has its count from the split). The schema's default and refusal of `autoReplicas`, and the head's
 * `choosesReplicasAtLoad` (head/state/record-changes.ts), all ask this.
 */
export function replicasChoosable(d: {
  model?: string;
  kind?: string;
  multiplex?: unknown;
  threads?: number;
  instances?: number;
  cpus: number;
  autoscale?: unknown;
  versions?: unknown;
  versionOf?: string;
}): boolean {
  return (
    (d.kind ?? 'model') === 'model' &&
    d.model !== undefined &&
    !GRAPH_MODEL_FILE.test(d.model) &&
    !d.multiplex &&
    d.threads === undefined &&
    d.instances === undefined &&
    d.cpus === 1 &&
    !d.autoscale &&
    !d.versions &&
    d.versionOf === undefined
  );
}

/**
 * What a user asks for when deploying one model. `model` is a path under the agent's model
 * directory. `gpus` may be a fraction (0.5 shares a device) or a whole number of devices.
 */
export const ModelDeploymentSchema = z
  .object({
    name: NameSchema,
    /** The model file (or uploaded model) each replica loads; with `versions`, the first version's when left out. */
    model: z.string().min(1).max(1024).optional(),
    /**
     * 'fn': `model` is `path#export`, a function under the agents' --module-dir run by a fn actor (graph steps).
     * 'class': `model` is `path#Export`, a class under --module-dir; each replica is one instance of it
     * (actors/class-host.ts), built with `args`, whose methods are called by name (docs/actors.md).
     */
    kind: z.enum(['model', 'fn', 'class']).optional(),
    /** For kind 'class': the constructor's arguments, JSON values (at most 64 KiB as JSON). */
    args: ClassArgsSchema.optional(),
    /**
     * For kind 'class': how long a restarted instance's `restore()` may take before the process is
     * ended and restarted (default 60 s); one that never settled left the instance STARTING forever.
     */
    restoreTimeoutS: z.number().min(0.1).max(3600).optional(),
    /**
     * For kind 'class': how many calls one instance runs at once (default 1: one at a time, in
     * order). Above 1, async methods interleave at their awaits, as Ray's async actors' max_concurrency.
     */
    maxConcurrency: z.number().int().min(1).max(MAX_CONCURRENCY).optional(),
    /**
     * For kind 'class': named concurrency groups (Ray's concurrency_groups), each with its own limit
     * and queue in an instance: `{ io: { maxConcurrency: 2, methods: ['fetch'] } }`. Methods in no
     * group run in the `default` group, whose limit is maxConcurrency (runtime/concurrency-groups.ts).
     */
    concurrencyGroups: ConcurrencyGroupsSchema.optional(),
    /**
     * Restarts each replica gets over its life after its process dies (Ray's max_restarts): 0 none
     * (DEAD at the first crash), -1 without end (with back-off). Absent: the head's --max-restarts
     * (crashes within 10 minutes) applies, as for every deployment that does not say.
     */
    maxRestarts: z.number().int().min(-1).max(MAX_RESTARTS).optional(),
    /**
     * For kind 'class': how many times a call of a method named in `retryable` is sent again after
     * its instance died running it (Ray's max_task_retries; -1 without end, default 0). Other methods are never retried.
     */
    maxTaskRetries: z.number().int().min(-1).max(MAX_RESTARTS).optional(),
    /** For kind 'class': the methods that are safe to run again (idempotent), which maxTaskRetries retries. */
    retryable: z.array(MethodNameSchema).max(1024).optional(),
    /**
     * Replicas to run (default 1). A model deployment that names none of replicas, threads,
     * instances, CPUs or autoscaling gets its count chosen at load (`autoReplicas`).
     */
    replicas: z.number().int().min(0).max(256).optional(),
    /**
     * Whether the head may add replicas at load (head/control/replicas-at-load.ts): a model whose lone
     * call is costly on a CPU runs best as one replica per core, each one session on its main thread
     * and serving its HTTP connections (bench/RESULTS-first-deploy.md), so its first replica asks
     * for the rest, as many as fit. Default: true when `replicas` is left out (and neither
     * autoscale nor versions set the count), false when named.
     */
    autoReplicas: z.boolean().optional(),
    gpus: z.number().min(0).max(64).refine(isMilliAmount, MILLI_MESSAGE).default(0),
    /**
     * CPUs each replica holds. At least MIN_REPLICA_CPUS: a tiny share (0.01, or 1e-300) let one
     * 2-CPU node start hundreds of actor processes of ~100 MB each.
     */
    cpus: z
      .number()
      .min(MIN_REPLICA_CPUS, `must be at least ${MIN_REPLICA_CPUS} (the smallest CPU share a replica may hold)`)
      .max(1024)
      .refine(isMilliAmount, MILLI_MESSAGE)
      .default(1),
    /** Host memory each replica needs, in bytes or with a unit ('512Mi', '2Gi', '1.5GB'). */
    memory: z.union([z.number().int().nonnegative(), z.string()]).transform(toBytes).optional(),
    /** `spread` replicas over nodes, then GPUs (default), or `pack` them onto the busiest node that fits. */
    placement: z.enum(['spread', 'pack']).default('spread'),
    /** onnxruntime intra-op threads per actor, or per instance with `instances` (default: its `cpus` over its instances, at least 1). */
    threads: z.number().int().min(1).max(256).optional(),
    /**
     * Model instances per replica (Triton's instance_group count): sessions of the model in one actor
     * process, each with `threads` intra-op threads, all but one on an inference thread of its own
     * and the last on the actor's main thread, so that a replica runs this many batches at once.
     * Default 1.
     */
    instances: z.number().int().min(1).max(MAX_INSTANCES).optional(),
    /**
     * How long (ms) a replica keeps polling for the next call after its queue empties, instead of
     * sleeping: a busy-poll window that spares a call arriving within it the process's wake-up, at
     * the cost of a core spinning for that long after each call. 0 turns it off. Absent: chosen at
     * load from the model's measured cost (actors/auto-layout.ts): DEFAULT_IDLE_SPIN_MS for a model
     * whose lone call is cheap, 0 for a costly one.
     */
    idleSpinMs: IdleSpinSchema.optional(),
    /** Calls allowed to wait for a replica; past it new calls fail at once with TROUPE_ERR_OVERLOADED. */
    maxQueue: z.number().int().min(0).max(1_000_000).default(1024),
    /**
     * Dynamic batching. Absent: each replica chooses at load from the model's measured cost
     * (actors/auto-layout.ts): up to DEFAULT_BATCH_MAX_SIZE rows a run, run at once when idle, for a
     * model whose lone call is cheap or that runs on a GPU; off (maxSize 1) for a costly model on a CPU.
     */
    batch: BatchSchema.optional(),
    /** Retries of a call whose actor died before answering (inference is idempotent). */
    maxRetries: z.number().int().min(0).max(10).default(2),
    /** Opt-in autoscaling between minReplicas and maxReplicas; `replicas` is the starting count. */
    autoscale: AutoscaleSchema.optional(),
    /** Class labels the HTTP API's classification extension adds to its "score:index" strings. */
    labels: LabelsSchema.optional(),
    /** Several versions, each its own replicas, calls split between them by weight (head/control/versions.ts). */
    versions: z.array(VersionSchema).min(1).max(8).optional(),
    /** The versions as they were before the last promotion (set by promote): what a rollback restores. */
    promotedFrom: z.array(VersionSchema).min(1).max(8).optional(),
    /** Many models per replica: `model` names a directory of models, loaded on demand (see MultiplexSchema). */
    multiplex: MultiplexSchema.optional(),
    /** Set by the head on the deployment that runs one version of another: that deployment's name. */
    versionOf: NameSchema.optional(),
  })
  .strict()
  .refine((d) => d.model !== undefined || d.versions !== undefined, {
    message: 'a deployment names a model (or versions)',
    path: ['model'],
  })
  .refine((d) => !d.versions || Math.abs(d.versions.reduce((n, v) => n + v.weight, 0) - 100) < 1e-9, {
    message: 'the weights of versions must sum to 100',
    path: ['versions'],
  })
  .refine((d) => !d.promotedFrom || (d.versions !== undefined && Math.abs(d.promotedFrom.reduce((n, v) => n + v.weight, 0) - 100) < 1e-9), {
    message: 'promotedFrom (the split a rollback restores) goes with versions, and its weights sum to 100',
    path: ['promotedFrom'],
  })
  .refine((d) => !d.versions || new Set(d.versions.map((v) => v.version)).size === d.versions.length, {
    message: 'each version needs a name of its own',
    path: ['versions'],
  })
  .refine((d) => !d.versions || d.name.length + 1 + Math.max(...d.versions.map((v) => v.version.length)) <= 63, {
    message: "'{name}.{version}' names a version's replicas and must fit in 63 characters",
    path: ['versions'],
  })
  .refine((d) => !d.multiplex || (d.kind ?? 'model') === 'model', { message: 'only a model deployment multiplexes', path: ['multiplex'] })
  .refine((d) => !d.multiplex || d.model !== undefined || d.versions !== undefined, {
    message: "a multiplexed deployment names the directory of its models in model (or each version's in its model)",
    path: ['model'],
  })
  .refine((d) => d.args === undefined || d.kind === 'class', { message: "only a class actor (kind 'class') takes args", path: ['args'] })
  .refine((d) => d.maxConcurrency === undefined || d.kind === 'class', {
    message: "only a class actor (kind 'class') takes maxConcurrency (a model replica's concurrency is its instances and batch)",
    path: ['maxConcurrency'],
  })
  .refine((d) => d.concurrencyGroups === undefined || d.kind === 'class', {
    message: "only a class actor (kind 'class') takes concurrencyGroups",
    path: ['concurrencyGroups'],
  })
  .refine((d) => (d.maxTaskRetries === undefined && d.retryable === undefined) || d.kind === 'class', {
    message:
      "only a class actor (kind 'class') retries method calls (maxTaskRetries, retryable): a model's inference is retried on another replica anyway",
    path: ['maxTaskRetries'],
  })
  .refine((d) => d.kind !== 'class' || (d.maxTaskRetries ?? 0) === 0 || (d.retryable?.length ?? 0) > 0, {
    message: 'maxTaskRetries retries only the methods named in retryable: name them (retryable: [...])',
    path: ['retryable'],
  })
  .refine((d) => d.restoreTimeoutS === undefined || d.kind === 'class', {
    message: "only a class actor (kind 'class') restores checkpoints",
    path: ['restoreTimeoutS'],
  })
  .refine((d) => (d.instances ?? 1) === 1 || ((d.kind ?? 'model') === 'model' && !d.multiplex && !GRAPH_MODEL_FILE.test(d.model ?? '')), {
    message: 'only a model deployment of one ONNX file has instances (a graph file runs its sessions in one thread)',
    path: ['instances'],
  })
  .refine((d) => d.idleSpinMs === undefined || ((d.kind ?? 'model') === 'model' && !d.multiplex), {
    message: 'only a model deployment spins while idle (idleSpinMs): fn steps, class actors and multiplexed sets do not',
    path: ['idleSpinMs'],
  })
  // A version split routes tensor calls by weight; a class actor's calls follow sessions and state instead.
  .refine((d) => !(d.versions && d.kind === 'class'), { message: 'a class actor takes no versions', path: ['versions'] })
  .refine((d) => d.gpus <= 1 || Number.isInteger(d.gpus), { message: 'gpus above 1 must be a whole number', path: ['gpus'] })
  .refine((d) => !d.autoscale || d.autoscale.minReplicas <= d.autoscale.maxReplicas, {
    message: 'autoscale.minReplicas must not exceed autoscale.maxReplicas',
    path: ['autoscale'],
  })
  .refine((d) => d.autoReplicas !== true || replicasChoosable(d), {
    message:
      'autoReplicas (the head choosing the replica count at load) goes with a model of one ONNX file that names none of threads, instances, cpus (other than 1), autoscale, versions or multiplex: those set the layout or the count',
    path: ['autoReplicas'],
  })
  .transform(({ autoReplicas, ...d }) => ({
    ...d,
    model: d.model ?? d.versions![0]!.model,
    replicas: d.replicas ?? 1,
    // Said only when on, so a spec that names its replicas (or where the count cannot be chosen) reads as it did.
    ...((autoReplicas ?? (d.replicas === undefined && replicasChoosable(d))) ? { autoReplicas: true as const } : {}),
  }));

export type ModelDeploymentInput = z.input<typeof ModelDeploymentSchema>;
export type ModelDeployment = z.output<typeof ModelDeploymentSchema>;
