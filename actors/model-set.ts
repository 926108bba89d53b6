import { readdirSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { TroupeError } from '../runtime/internal.js';
import { withShownPath } from '../runtime/model-path.js';
import type { CallTiming, ModelMetadata, MultiplexSpec, Tensor } from '../runtime/internal.js';
import { Batcher } from './batcher.js';
import type { BatcherOptions, BatcherStats } from './batcher.js';
import { CallTotalsRecorder } from './call-totals.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';

/** A model of the set that is loaded: its session behind a batcher of its own (calls of two models never share a batch). */
interface Loaded {
  model: OnnxModel;
  batcher: Batcher;
  bytes: number;
  /** Calls holding it: it is released only once there are none. */
  pins: number;
  unpinned: (() => void) | undefined;
}

const STAT_KEYS = ['calls', 'batches', 'rows', 'expired', 'failed', 'computeMs', 'queueMs'] as const;

/** A load under way, and the calls waiting for it. */
interface Loading {
  waiters: number;
  done: Promise<Loaded>;
}

interface Counts {
  loads: number;
  hits: number;
  misses: number;
  /** Times it was taken out of memory to make room for another. */
  evictions: number;
  /** Loads that failed (a file onnxruntime cannot read); each is remembered until its back-off passes or its file changes. */
  failedLoads: number;
}

/** A load that failed: answered at once until `retryAt`, or until the file's size or mtime differ. */
interface Failure {
  size: number;
  mtimeMs: number;
  error: TroupeError;
  retryAt: number;
  /** Failed loads in a row of this file: the back-off doubles with each. */
  streak: number;
}

/** The back-off after a failed load: 10 s, doubling up to 10 minutes (ModelMesh retries failed loads likewise). */
export const LOAD_RETRY_MS = { first: 10_000, max: 600_000 };

/** The `*.onnx` files of `dir`, by name without `.onnx`, with their sizes. */
export function listModels(dir: string): Map<string, { path: string; bytes: number }> {
  const models = new Map<string, { path: string; bytes: number }>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.onnx')) continue;
    const path = join(dir, entry.name);
    models.set(entry.name.slice(0, -'.onnx'.length), { path, bytes: statSync(path).size });
  }
  return models;
}

/**
 * The models of a multiplexed replica: each loaded on its first call, at most `maxModels` (and
 * `maxModelMemory` bytes of model files) at once, the least recently used evicted first once its
 * calls are done. A model is loaded once however many calls for it arrive while it loads.
 */
export class ModelSet {
  readonly #deployment: string;
  readonly #dir: string;
  #files: Map<string, { path: string; bytes: number }>;
  readonly #spec: MultiplexSpec;
  readonly #load: LoadOptions;
  readonly #batching: (metadata: ModelMetadata) => BatcherOptions;
  readonly #retry: { first: number; max: number };
  /** Loaded models, least recently used first (a Map keeps insertion order; a use re-inserts). */
  readonly #loaded = new Map<string, Loaded>();
  readonly #loading = new Map<string, Loading>();
  readonly #counts = new Map<string, Counts>();
  readonly #failed = new Map<string, Failure>();
  /** Every call's Triton totals, over all the models (Triton's statistics of the deployment). */
  readonly totals = new CallTotalsRecorder();
  #lastLoad: Promise<unknown> = Promise.resolve();
  readonly #evicted: BatcherStats = { calls: 0, batches: 0, rows: 0, expired: 0, failed: 0, computeMs: 0, queueMs: 0 };

  constructor(
    deployment: string,
    dir: string,
    spec: MultiplexSpec,
    load: LoadOptions,
    batching: (metadata: ModelMetadata) => BatcherOptions,
    retry = LOAD_RETRY_MS,
  ) {
    this.#retry = retry;
    this.#deployment = deployment;
    this.#dir = dir;
    this.#files = listModels(dir);
    this.#spec = spec;
    this.#load = load;
    this.#batching = batching;
  }

  get names(): string[] {
    return [...this.#files.keys()].sort();
  }

  /** Calls accepted and not yet answered, over every loaded model. */
  get outstanding(): number {
    let n = 0;
    for (const l of this.#loaded.values()) n += l.batcher.outstanding;
    return n;
  }

  get queued(): number {
    let n = 0;
    for (const l of this.#loaded.values()) n += l.batcher.queued;
    return n;
  }

  /** Each model's loads, hits, misses, evictions and failed loads so far, and whether it is loaded now. */
  report(): Record<string, Counts & { loaded: boolean }> {
    return Object.fromEntries([...this.#counts].map(([name, c]) => [name, { ...c, loaded: this.#loaded.has(name) }]));
  }

  /** Resolves once the loads queued so far, and the evictions that make room after them, are done. */
  async settled(): Promise<void> {
    await this.#lastLoad;
  }

  /** The replica's counts over every model it has run, evicted ones included. */
  stats(): BatcherStats {
    const total = { ...this.#evicted };
    for (const l of this.#loaded.values()) for (const key of STAT_KEYS) total[key] += l.batcher.stats[key];
    return total;
  }

  /**
   * Runs one call on model `name`, loading it first if need be (TROUPE_ERR_UNKNOWN_MODEL if it is
   * not in the set); `call` makes the batcher's arguments once the model's signature is known (to
   * check the inputs against it). The model cannot be evicted while the call holds it.
   */
  async run(
    name: string,
    call: (metadata: ModelMetadata) => Parameters<Batcher['submit']>,
  ): Promise<{ outputs: Record<string, Tensor>; timing: CallTiming }> {
    const counts = this.#countsOf(name);
    let loaded = this.#loaded.get(name);
    if (!loaded && !this.#loading.has(name)) {
      const refused = await this.#stillFailed(name);
      if (refused) {
        this.totals.failed([0]);
        throw refused;
      }
      // While this call looked at the file, another may have loaded the model or begun to.
      loaded = this.#loaded.get(name);
    }
    if (loaded) {
      counts.hits++;
      this.#loaded.delete(name);
      this.#loaded.set(name, loaded);
      loaded.pins++;
    } else {
      counts.misses++;
      let loading = this.#loading.get(name);
      if (!loading) {
        const pending: Loading = { waiters: 0, done: Promise.resolve(undefined as unknown as Loaded) };
        pending.done = this.#queueLoad(name, counts, pending).finally(() => this.#loading.delete(name));
        this.#loading.set(name, (loading = pending));
      }
      // Counted now, pinned by the load itself when it ends: no eviction can come between.
      loading.waiters++;
      const asked = Date.now();
      loaded = await loading.done.catch((err: unknown) => {
        this.totals.failed([Date.now() - asked]);
        throw err;
      });
    }
    try {
      return await loaded.batcher.submit(...call(loaded.model.metadata));
    } finally {
      if (--loaded.pins === 0) loaded.unpinned?.();
    }
  }

  #countsOf(name: string): Counts {
    // A model added to the directory since the replica listed it is a member too: looked for
    // again before the call is refused (a miss is rare, and listing a directory is cheap).
    if (!this.#files.has(name)) this.#files = listModels(this.#dir);
    const file = this.#files.get(name);
    if (!file) {
      // The other names are not listed: inference may need no token (a loopback head), and a
      // caller without one must not learn what else is served (as the head's own 404s).
      throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `deployment '${this.#deployment}' has no model '${name.slice(0, 100)}'`);
    }
    let counts = this.#counts.get(name);
    if (!counts) this.#counts.set(name, (counts = { loads: 0, hits: 0, misses: 0, evictions: 0, failedLoads: 0 }));
    return counts;
  }

  /**
   * The remembered error of a model whose last load failed, while its back-off lasts and its file
   * is unchanged; undefined when a load may be tried (again). A bad file thus costs one failed load
   * per back-off, not one per call.
   */
  async #stillFailed(name: string): Promise<TroupeError | undefined> {
    const failure = this.#failed.get(name);
    if (!failure) return undefined;
    const now = await stat(this.#files.get(name)!.path).catch(() => undefined);
    if (now && (now.size !== failure.size || now.mtimeMs !== failure.mtimeMs)) {
      this.#failed.delete(name);
      return undefined;
    }
    return Date.now() < failure.retryAt ? failure.error : undefined;
  }

  /**
   * Loads run one at a time, so a replica never holds more than its limits (plus the one model
   * loading), even while models change; the room a new model needs is made after it loaded, so a
   * load that fails evicts nothing. The calls waiting for it run while the room is made.
   */
  #queueLoad(name: string, counts: Counts, pending: Loading): Promise<Loaded> {
    const next = this.#lastLoad.then(() => this.#loadOne(name, counts, pending));
    this.#lastLoad = next.then(
      () => this.#makeRoom(0),
      () => undefined,
    );
    return next;
  }

  async #loadOne(name: string, counts: Counts, pending: Loading): Promise<Loaded> {
    const file = this.#files.get(name)!;
    const info = await stat(file.path).catch(() => undefined);
    if (!info)
      throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `model '${name}' of deployment '${this.#deployment}' is no longer in its directory`);
    file.bytes = info.size;
    const budget = this.#spec.maxModelMemory;
    if (budget !== undefined && file.bytes > budget)
      throw new TroupeError(
        'TROUPE_ERR_MODEL_TOO_LARGE',
        `model '${name}' of deployment '${this.#deployment}' is ${file.bytes} bytes, over its maxModelMemory of ${budget}`,
      );
    // maxModelMemory is a hard bound: bytes it lacks are freed before the load (maxModels waits for it).
    await this.#makeRoom(file.bytes);
    let model: OnnxModel;
    try {
      model = await OnnxModel.load(file.path, this.#load);
    } catch (err) {
      // Callers learn the model's name, never the replica's path to it.
      const shown = withShownPath(
        err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_MODEL_LOAD', String(err)),
        file.path,
        `${name}.onnx`,
      );
      const error = new TroupeError(shown.code, `model '${name}' of deployment '${this.#deployment}' did not load: ${shown.message}`);
      const streak = (this.#failed.get(name)?.streak ?? 0) + 1;
      const backoff = Math.min(this.#retry.max, this.#retry.first * 2 ** (streak - 1));
      this.#failed.set(name, { size: info.size, mtimeMs: info.mtimeMs, error, retryAt: Date.now() + backoff, streak });
      counts.failedLoads++;
      throw error;
    }
    this.#failed.delete(name);
    const batcher = new Batcher((inputs, outputs) => model.run(inputs, outputs), this.#batching(model.metadata), this.totals);
    const loaded: Loaded = { model, batcher, bytes: file.bytes, pins: pending.waiters, unpinned: undefined };
    counts.loads++;
    this.#loaded.set(name, loaded);
    return loaded;
  }

  /**
   * Evicts least recently used models, each once no call holds it, until the set is within
   * maxModels and one more of `bytes` fits in maxModelMemory. The newest model is never its own
   * victim: alone it always fits.
   */
  async #makeRoom(bytes: number): Promise<void> {
    const budget = this.#spec.maxModelMemory;
    const over = () => {
      const inUse = [...this.#loaded.values()].reduce((n, l) => n + l.bytes, 0);
      return this.#loaded.size > this.#spec.maxModels || (budget !== undefined && inUse + bytes > budget);
    };
    while (over() && this.#loaded.size > (bytes > 0 ? 0 : 1)) {
      const [name, victim] = this.#loaded.entries().next().value as [string, Loaded];
      // Out of the set first: a call that comes for it now loads it anew (after this load).
      this.#loaded.delete(name);
      this.#counts.get(name)!.evictions++;
      while (victim.pins > 0) await new Promise<void>((resolve) => (victim.unpinned = resolve));
      await victim.batcher.whenIdle();
      for (const key of STAT_KEYS) this.#evicted[key] += victim.batcher.stats[key];
      await victim.model.release();
    }
  }
}
