import { readFile, stat } from 'node:fs/promises';
import { TroupeError, inspectOnnx } from '../runtime/internal.js';
import { withShownPath } from '../runtime/model-path.js';
import type { CallTiming, CallTotals, ModelMetadata, MultiplexSpec, Tensor, TenantState } from '../runtime/internal.js';
import { Batcher } from './batcher.js';
import type { BatcherOptions, BatcherStats } from './batcher.js';
import { CallTotalsRecorder } from './call-totals.js';
import { ModelFiles } from './model-files.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';

/** A model of the set that is loaded: its session behind a batcher of its own (calls of two models never share a batch). */
interface Loaded {
  model: OnnxModel;
  batcher: Batcher;
  bytes: number;
  /** The file's mtime when it was loaded: a file changed since is reloaded on its next call. */
  mtimeMs: number;
  /** Calls holding it: it is released only once there are none. */
  pins: number;
  unpinned: (() => void) | undefined;
  /** Taken out of the set: its session is released once its calls are done (once, whoever took it out). */
  retired?: boolean;
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

/**
 * The models of a multiplexed replica: each loaded on its first call, at most `maxModels` (and
 * `maxModelMemory` bytes of model files) at once, the least recently used evicted first once its
 * calls are done. A model is loaded once however many calls for it arrive while it loads.
 */
export class ModelSet {
  readonly #deployment: string;
  readonly #files: ModelFiles;
  /** Models whose file went from the directory while this replica served: their calls say so. */
  readonly #removed = new Set<string>();
  /** Models a repository load pinned: never evicted for another, until an unload. */
  readonly #pinned = new Set<string>();
  /** Each model's call totals (each adds to {@link totals} too): Triton's statistics per tenant. */
  readonly #tenantTotals = new Map<string, CallTotalsRecorder>();
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
    this.#files = new ModelFiles(dir);
    this.#spec = spec;
    this.#load = load;
    this.#batching = batching;
  }

  get names(): string[] {
    return this.#files.names;
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

  /** Each model's call totals, for the models called so far. */
  tenantTotals(): Record<string, CallTotals> {
    return Object.fromEntries([...this.#tenantTotals].map(([name, t]) => [name, t.totals]));
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
    const loaded = await this.#acquire(name, true);
    try {
      return await loaded.batcher.submit(...call(loaded.model.metadata));
    } finally {
      this.#release(loaded);
    }
  }

  /**
   * Model `name` loaded and held (pinned once more) for the caller, which releases it; `counted`:
   * a call's use, counted as a hit or a miss (a repository load is neither).
   */
  async #acquire(name: string, counted: boolean): Promise<Loaded> {
    const counts = this.#countsOf(name);
    const totals = this.#totalsOf(name);
    let loaded = this.#loaded.get(name);
    if (!loaded && !this.#loading.has(name)) {
      const refused = await this.#stillFailed(name);
      if (refused) {
        totals.failed([0]);
        throw refused;
      }
      // While this call looked at the file, another may have loaded the model or begun to.
      loaded = this.#loaded.get(name);
    }
    if (loaded) {
      if (counted) counts.hits++;
      this.#loaded.delete(name);
      this.#loaded.set(name, loaded);
      loaded.pins++;
      return loaded;
    }
    if (counted) counts.misses++;
    let loading = this.#loading.get(name);
    if (!loading) {
      const pending: Loading = { waiters: 0, done: Promise.resolve(undefined as unknown as Loaded) };
      pending.done = this.#queueLoad(name, counts, pending).finally(() => this.#loading.delete(name));
      this.#loading.set(name, (loading = pending));
    }
    // Counted now, pinned by the load itself when it ends: no eviction can come between.
    loading.waiters++;
    const asked = Date.now();
    return loading.done.catch((err: unknown) => {
      totals.failed([Date.now() - asked]);
      throw err;
    });
  }

  #release(loaded: Loaded): void {
    if (--loaded.pins === 0) loaded.unpinned?.();
  }

  #totalsOf(name: string): CallTotalsRecorder {
    let totals = this.#tenantTotals.get(name);
    if (!totals) this.#tenantTotals.set(name, (totals = new CallTotalsRecorder(this.totals)));
    return totals;
  }

  #countsOf(name: string): Counts {
    // A model added to the directory since the replica last looked is a member too: looked for
    // again before the call is refused (a miss is rare, and listing a directory is cheap).
    if (!this.#files.get(name)) this.refresh();
    if (!this.#files.get(name)) throw this.#unknown(name);
    let counts = this.#counts.get(name);
    if (!counts) this.#counts.set(name, (counts = { loads: 0, hits: 0, misses: 0, evictions: 0, failedLoads: 0 }));
    return counts;
  }

  /**
   * The 404 for a name the set does not have. The other names are not listed: inference may need
   * no token (a loopback head), and a caller without one must not learn what else is served (as
   * the head's own 404s).
   */
  #unknown(name: string): TroupeError {
    const shown = name.slice(0, 100);
    return new TroupeError(
      'TROUPE_ERR_UNKNOWN_MODEL',
      this.#removed.has(name)
        ? `model '${shown}' of deployment '${this.#deployment}' was removed from its directory`
        : `deployment '${this.#deployment}' has no model '${shown}'`,
    );
  }

  /**
   * Lists the directory again: a new file is a model of the set from now on; a changed one
   * (size or mtime) is taken out of memory once its calls are done and loaded anew on its next
   * call, its remembered failure forgotten; a removed one is taken out and its calls refused.
   */
  refresh(): void {
    const { added, changed, removed } = this.#files.refresh();
    for (const name of added) this.#removed.delete(name);
    for (const name of removed) {
      this.#removed.add(name);
      this.#pinned.delete(name);
    }
    for (const name of [...changed, ...removed]) this.#failed.delete(name);
    for (const [name, loaded] of [...this.#loaded]) {
      const file = this.#files.get(name);
      if (!file || file.bytes !== loaded.bytes || file.mtimeMs !== loaded.mtimeMs) void this.#retire(name, loaded);
    }
  }

  /**
   * Loads model `name` if it is not loaded and keeps it in memory, never evicted for another
   * model, until {@link unpin} (Triton's explicit load, ModelMesh's pinned models). At most
   * maxModels models are pinned at once, so calls of the others always find room.
   */
  async pin(name: string): Promise<void> {
    this.#countsOf(name);
    if (!this.#pinned.has(name) && this.#pinned.size >= this.#spec.maxModels)
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `cannot pin model '${name}' of deployment '${this.#deployment}': this replica pins ${this.#pinned.size} models already, its maxModels`,
      );
    this.#pinned.add(name);
    let loaded: Loaded;
    try {
      loaded = await this.#acquire(name, false);
    } catch (err) {
      this.#pinned.delete(name);
      throw err;
    }
    this.#release(loaded);
  }

  /** Unpins model `name` and takes it out of memory once its calls are done (a later call loads it again). */
  unpin(name: string): void {
    this.#countsOf(name);
    this.#pinned.delete(name);
    const loaded = this.#loaded.get(name);
    if (loaded) void this.#retire(name, loaded);
  }

  /** Every model of the set (or only `name`, if it is one) with its state here; the directory is listed again first. */
  catalog(name?: string): TenantState[] {
    this.refresh();
    const names = name === undefined ? this.#files.names : this.#files.get(name) ? [name] : [];
    return names.map((n) => this.#stateOf(n));
  }

  #stateOf(name: string): TenantState {
    const pinned = this.#pinned.has(name) ? { pinned: true } : {};
    if (this.#loaded.has(name)) return { name, state: 'LOADED', ...pinned };
    if (this.#loading.has(name)) return { name, state: 'LOADING', ...pinned };
    const failure = this.#failed.get(name);
    if (failure) {
      const retry = Math.max(0, Math.ceil((failure.retryAt - Date.now()) / 1000));
      const when = retry > 0 ? `retried on a call in ${retry} s, or at once when its file changes` : 'retried on its next call';
      return { name, state: 'UNAVAILABLE', reason: `${failure.error.message} (${when})`, ...pinned };
    }
    return { name, state: 'AVAILABLE', ...pinned };
  }

  /**
   * Model `name`'s inputs and outputs: the loaded session's, or read from its file without loading
   * it (the ONNX graph's declared inputs and outputs, as onnxruntime reports them once loaded).
   */
  async describe(name: string): Promise<ModelMetadata> {
    this.#countsOf(name);
    const loaded = this.#loaded.get(name);
    if (loaded) return loaded.model.metadata;
    const label = `model '${name}' of deployment '${this.#deployment}'`;
    const bytes = await readFile(this.#files.get(name)!.path).catch(() => {
      throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `${label} is no longer in its directory`);
    });
    const { inputs, outputs } = inspectOnnx(bytes, label);
    return { inputs, outputs };
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
    const file = this.#files.get(name);
    const info = file && (await stat(file.path).catch(() => undefined));
    if (!file || !info)
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_MODEL',
        `model '${name}' of deployment '${this.#deployment}' was removed from its directory`,
      );
    const budget = this.#spec.maxModelMemory;
    if (budget !== undefined && info.size > budget)
      throw new TroupeError(
        'TROUPE_ERR_MODEL_TOO_LARGE',
        `model '${name}' of deployment '${this.#deployment}' is ${info.size} bytes, over its maxModelMemory of ${budget}`,
      );
    // maxModelMemory is a hard bound: bytes it lacks are freed before the load (maxModels waits for it).
    await this.#makeRoom(info.size);
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
    const batcher = new Batcher((inputs, outputs) => model.run(inputs, outputs), this.#batching(model.metadata), this.#totalsOf(name));
    const loaded: Loaded = { model, batcher, bytes: info.size, mtimeMs: info.mtimeMs, pins: pending.waiters, unpinned: undefined };
    counts.loads++;
    this.#loaded.set(name, loaded);
    return loaded;
  }

  /**
   * Evicts least recently used models that are not pinned, each once no call holds it, until the
   * set is within maxModels and one more of `bytes` fits in maxModelMemory. The newest model is
   * never its own victim: alone it always fits. Pinned models may hold all the room: then a new
   * model is loaded beside them (pins are at most maxModels, so that is one more at most).
   */
  async #makeRoom(bytes: number): Promise<void> {
    const budget = this.#spec.maxModelMemory;
    const over = () => {
      const inUse = [...this.#loaded.values()].reduce((n, l) => n + l.bytes, 0);
      // Before a load only memory is made room for: a set that pins hold over maxModels must not
      // lose a model to a load that may fail.
      if (bytes > 0) return budget !== undefined && inUse + bytes > budget;
      return this.#loaded.size > this.#spec.maxModels || (budget !== undefined && inUse > budget);
    };
    while (over()) {
      const names = [...this.#loaded.keys()];
      const candidates = bytes > 0 ? names : names.slice(0, -1);
      const name = candidates.find((n) => !this.#pinned.has(n));
      if (name === undefined) return;
      this.#counts.get(name)!.evictions++;
      await this.#retire(name, this.#loaded.get(name)!);
    }
  }

  /**
   * Takes a model out of the set at once (a call that comes for it now loads it anew, after the
   * loads queued) and releases its session once no call holds it and its batcher is idle.
   */
  async #retire(name: string, victim: Loaded): Promise<void> {
    if (this.#loaded.get(name) === victim) this.#loaded.delete(name);
    if (victim.retired) return;
    victim.retired = true;
    while (victim.pins > 0) await new Promise<void>((resolve) => (victim.unpinned = resolve));
    await victim.batcher.whenIdle();
    for (const key of STAT_KEYS) this.#evicted[key] += victim.batcher.stats[key];
    await victim.model.release();
  }
}
