import { TroupeError } from '../../runtime/internal.js';

/** How long, how many and how many bytes of actor call results the head keeps for Futures passed as arguments. */
export const CALL_RESULT_TTL_MS = 60_000;
export const MAX_CALL_RESULTS = 10_000;
export const MAX_CALL_RESULT_BYTES = 64 * 2 ** 20;

interface Entry {
  result: Promise<unknown>;
  at: number;
  bytes: number;
}

/**
 * About how many bytes a value holds: byte arrays and strings by length, containers by their
 * items. For the store's bound only; walks at most a few thousand items, then counts the rest as large.
 */
export function roughBytes(value: unknown, budget = { items: 4096 }): number {
  if (--budget.items < 0) return 1024;
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === 'string') return value.length * 2;
  if (value === null || typeof value !== 'object') return 8;
  let sum = 16;
  for (const v of Array.isArray(value) ? value : Object.values(value as Record<string, unknown>)) sum += roughBytes(v, budget);
  return sum;
}

/**
 * Results of recent actor calls, by call id, so a later call can take one as an argument (a
 * Future passed along) without it coming back through the client. A call is recorded when it
 * arrives, so one sent right after it, on the same connection, always finds it, even unfinished.
 * Bounded by count, age and bytes; past them the oldest go, and a Future naming one fails with
 * TROUPE_ERR_UNKNOWN_CALL.
 */
export class CallResults {
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  /** Records a call's result as it will be; returns it. */
  add(id: string, result: Promise<unknown>): Promise<unknown> {
    this.#drop(id);
    const entry: Entry = { result, at: Date.now(), bytes: 0 };
    this.#entries.set(id, entry);
    // A failed call's error is kept too (its referrers fail with it); nobody may be waiting on it.
    result.then(
      (value) => {
        if (this.#entries.get(id) !== entry) return;
        entry.bytes = roughBytes(value);
        this.#bytes += entry.bytes;
        this.#trim();
      },
      () => {},
    );
    this.#trim();
    return result;
  }

  /** The result of call `id`; rejects with TROUPE_ERR_UNKNOWN_CALL if the head holds none. */
  get(id: string): Promise<unknown> {
    this.#trim();
    const entry = this.#entries.get(id);
    if (!entry) {
      return Promise.reject(
        new TroupeError(
          'TROUPE_ERR_UNKNOWN_CALL',
          `no actor call '${id.slice(0, 64)}' is held by the head (results are kept ${CALL_RESULT_TTL_MS / 1000} s, ${MAX_CALL_RESULTS} calls, ${MAX_CALL_RESULT_BYTES / 2 ** 20} MiB)`,
        ),
      );
    }
    return entry.result;
  }

  #drop(id: string): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    this.#bytes -= entry.bytes;
    this.#entries.delete(id);
  }

  #trim(): void {
    const oldest = Date.now() - CALL_RESULT_TTL_MS;
    for (const [id, entry] of this.#entries) {
      if (entry.at >= oldest && this.#entries.size <= MAX_CALL_RESULTS && this.#bytes <= MAX_CALL_RESULT_BYTES) break;
      this.#drop(id);
    }
  }
}
