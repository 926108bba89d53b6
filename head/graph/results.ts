import { TroupeError, pickReferenced, referenceFailed } from '../../runtime/internal.js';
import type { RunRef, WireTensor, WireTensorMap } from '../../runtime/internal.js';

export interface ResultStoreOptions {
  /** Finished runs kept, at most. */
  maxEntries: number;
  /** Bytes of output tensors kept, at most. */
  maxBytes: number;
  /** How long a finished run's result stays referable. */
  ttlMs: number;
}

// Futures are usually consumed within milliseconds of the run they name; these bounds keep the
// cost of remembering every run small for the many servers that never pass one.
export const DEFAULT_RESULT_STORE: ResultStoreOptions = { maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, ttlMs: 60_000 };

interface Finished {
  result: Promise<WireTensorMap>;
  at: number;
  bytes: number;
}

function bytesOf(outputs: WireTensorMap): number {
  let n = 0;
  for (const t of Object.values(outputs)) n += t.data instanceof Uint8Array ? t.data.byteLength : t.data.reduce((s, x) => s + x.length, 0);
  return n;
}

/**
 * The head's record of recent runs, so a future passed as an input is resolved here, without a
 * round trip to the client (Ray's object store idea, kept small). A run is held from the moment
 * it arrives: a later run naming it waits for it. Finished runs stay until their TTL passes or
 * the count or byte bound pushes the oldest out; runs still in flight are never dropped (they
 * are bounded by the deployments' queues). Eviction is lazy, on each insert and lookup, and O(1)
 * amortised: finished runs sit in a map in the order they finished.
 */
export class ResultStore {
  readonly #options: ResultStoreOptions;
  readonly #running = new Map<string, Promise<WireTensorMap>>();
  readonly #finished = new Map<string, Finished>();
  #bytes = 0;

  constructor(options: Partial<ResultStoreOptions> = {}) {
    this.#options = { ...DEFAULT_RESULT_STORE, ...options };
  }

  /** Finished runs held now, and their output bytes. */
  get size(): { running: number; finished: number; bytes: number } {
    return { running: this.#running.size, finished: this.#finished.size, bytes: this.#bytes };
  }

  /** Holds run `id`'s result from now on (a later record under the same id replaces it). */
  record(id: string, result: Promise<WireTensorMap>): void {
    this.#drop(id);
    this.#running.set(id, result);
    const finish = (bytes: number) => {
      if (this.#running.get(id) !== result) return; // replaced meanwhile
      this.#running.delete(id);
      this.#finished.set(id, { result, at: Date.now(), bytes });
      this.#bytes += bytes;
      this.#evict();
    };
    result.then(
      (outputs) => finish(bytesOf(outputs)),
      () => finish(0),
    );
    this.#evict();
  }

  /** The result of run `id`; TROUPE_ERR_UNKNOWN_RUN when it is not held. */
  get(id: string, label: string): Promise<WireTensorMap> {
    this.#evict();
    const result = this.#running.get(id) ?? this.#finished.get(id)?.result;
    if (!result) {
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_RUN',
        `${label} refers to run '${id}', which this head does not hold: it never arrived here, or it finished more than ${Math.round(this.#options.ttlMs / 1000)} s ago or was pushed out of the result cache`,
      );
    }
    return result;
  }

  /**
   * The tensor a reference means: the named output, or the run's only output, or the output with
   * the input's own name. A failed run fails this input with the same code.
   */
  async resolve(input: string, ref: RunRef): Promise<WireTensor> {
    let outputs: WireTensorMap;
    try {
      outputs = await this.get(ref.run, `input '${input}'`);
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'TROUPE_ERR_UNKNOWN_RUN') throw err;
      throw referenceFailed(input, ref, err);
    }
    return pickReferenced(input, ref, outputs);
  }

  #drop(id: string): void {
    this.#running.delete(id);
    const old = this.#finished.get(id);
    if (old) {
      this.#finished.delete(id);
      this.#bytes -= old.bytes;
    }
  }

  #evict(): void {
    const now = Date.now();
    const { maxEntries, maxBytes, ttlMs } = this.#options;
    for (const [id, f] of this.#finished) {
      const over = this.#finished.size > maxEntries || this.#bytes > maxBytes || now - f.at > ttlMs;
      if (!over) break;
      this.#finished.delete(id);
      this.#bytes -= f.bytes;
    }
  }
}
