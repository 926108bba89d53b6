import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { TroupeError } from '../runtime/internal.js';
import type { CallTiming, ModelMetadata, MultiplexSpec, Tensor } from '../runtime/internal.js';
import { Batcher } from './batcher.js';
import type { BatcherOptions, BatcherStats } from './batcher.js';
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
}

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
  /** Loaded models, least recently used first (a Map keeps insertion order; a use re-inserts). */
  readonly #loaded = new Map<string, Loaded>();
  readonly #loading = new Map<string, Loading>();
  readonly #counts = new Map<string, Counts>();
  #lastLoad: Promise<unknown> = Promise.resolve();
  readonly #evicted: BatcherStats = { calls: 0, batches: 0, rows: 0, expired: 0, failed: 0, computeMs: 0, queueMs: 0 };

  constructor(
    deployment: string,
    dir: string,
    spec: MultiplexSpec,
    load: LoadOptions,
    batching: (metadata: ModelMetadata) => BatcherOptions,
  ) {
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

  /** Each model's loads, hits and misses so far, and whether it is loaded now. */
  report(): Record<string, Counts & { loaded: boolean }> {
    return Object.fromEntries([...this.#counts].map(([name, c]) => [name, { ...c, loaded: this.#loaded.has(name) }]));
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
      loaded = await loading.done;
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
    if (!counts) this.#counts.set(name, (counts = { loads: 0, hits: 0, misses: 0 }));
    return counts;
  }

  /** Loads run one at a time, so a replica never holds more than its limits, even while models change. */
  #queueLoad(name: string, counts: Counts, pending: Loading): Promise<Loaded> {
    const next = this.#lastLoad.then(() => this.#loadOne(name, counts, pending));
    this.#lastLoad = next.catch(() => undefined);
    return next;
  }

  async #loadOne(name: string, counts: Counts, pending: Loading): Promise<Loaded> {
    const file = this.#files.get(name)!;
    const budget = this.#spec.maxModelMemory;
    if (budget !== undefined && file.bytes > budget)
      throw new TroupeError(
        'TROUPE_ERR_MODEL_TOO_LARGE',
        `model '${name}' of deployment '${this.#deployment}' is ${file.bytes} bytes, over its maxModelMemory of ${budget}`,
      );
    await this.#makeRoom(file.bytes);
    const model = await OnnxModel.load(file.path, this.#load);
    const batcher = new Batcher((inputs, outputs) => model.run(inputs, outputs), this.#batching(model.metadata));
    const loaded: Loaded = { model, batcher, bytes: file.bytes, pins: pending.waiters, unpinned: undefined };
    counts.loads++;
    this.#loaded.set(name, loaded);
    return loaded;
  }

  /** Evicts least recently used models, each once no call holds it, until one more of `bytes` fits. */
  async #makeRoom(bytes: number): Promise<void> {
    const budget = this.#spec.maxModelMemory;
    const over = () => {
      const inUse = [...this.#loaded.values()].reduce((n, l) => n + l.bytes, 0);
      return this.#loaded.size + 1 > this.#spec.maxModels || (budget !== undefined && inUse + bytes > budget);
    };
    while (over() && this.#loaded.size > 0) {
      const [name, victim] = this.#loaded.entries().next().value as [string, Loaded];
      // Out of the set first: a call that comes for it now loads it anew (after this load).
      this.#loaded.delete(name);
      while (victim.pins > 0) await new Promise<void>((resolve) => (victim.unpinned = resolve));
      await victim.batcher.whenIdle();
      for (const key of STAT_KEYS) this.#evicted[key] += victim.batcher.stats[key];
      await victim.model.release();
    }
  }
}
