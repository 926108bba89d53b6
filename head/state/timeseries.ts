/**
 * Fixed-size in-memory time series: the head's own history for the status page, so a person can
 * see the last minutes without running Prometheus. Memory is bounded by `capacity` samples per
 * series; a series that has had no value for a whole window is forgotten.
 */

/** A ring of numbers; NaN stands for "no value" so the storage stays a flat Float64Array. */
class Ring {
  readonly #values: Float64Array;

  constructor(capacity: number) {
    this.#values = new Float64Array(capacity).fill(Number.NaN);
  }

  set(sample: number, value: number | null): void {
    this.#values[sample % this.#values.length] = value === null || !Number.isFinite(value) ? Number.NaN : value;
  }

  get(sample: number): number | null {
    const v = this.#values[sample % this.#values.length]!;
    return Number.isNaN(v) ? null : v;
  }
}

/** Samples after a sequence number: one time (ms since the epoch) per sample, one value per series. */
export interface SeriesDelta {
  /** The sequence number of the newest sample included; pass it back to get only what follows. */
  seq: number;
  times: number[];
  values: Record<string, (number | null)[]>;
}

export class SeriesStore {
  readonly capacity: number;
  readonly #times: Float64Array;
  readonly #series = new Map<string, { ring: Ring; lastSet: number }>();
  /** Samples recorded so far; sample `n` (1-based) lives at slot `n % capacity`. */
  #seq = 0;

  /** @param capacity samples kept per series (600 at one a second: ten minutes). */
  constructor(capacity = 600) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.#times = new Float64Array(capacity);
  }

  get seq(): number {
    return this.#seq;
  }

  /**
   * Records one sample at `time`. Series absent from `values` get no value for it; series seen
   * for the first time have no values before it.
   *
   * @example
   * store.record(Date.now(), { 'rps|mlp': 12.5, 'p99|mlp': 3.1 });
   */
  record(time: number, values: Record<string, number | null>): void {
    const seq = ++this.#seq;
    this.#times[seq % this.capacity] = time;
    for (const [id, value] of Object.entries(values)) {
      let s = this.#series.get(id);
      if (!s) {
        s = { ring: new Ring(this.capacity), lastSet: seq };
        this.#series.set(id, s);
      }
      s.ring.set(seq, value);
      if (value !== null) s.lastSet = seq;
    }
    for (const [id, s] of this.#series) {
      if (!(id in values)) s.ring.set(seq, null);
      // Nothing left in the window: a removed deployment or GPU stops costing space and bytes.
      if (seq - s.lastSet >= this.capacity) this.#series.delete(id);
    }
  }

  /**
   * Samples newer than `after` (all that are kept, when `after` is older than the window), of the
   * series `include` accepts (all by default).
   */
  since(after = 0, include: (id: string) => boolean = () => true): SeriesDelta {
    const first = Math.max(after + 1, this.#seq - this.capacity + 1, 1);
    const times: number[] = [];
    for (let n = first; n <= this.#seq; n++) times.push(this.#times[n % this.capacity]!);
    const values: Record<string, (number | null)[]> = {};
    for (const [id, s] of this.#series) {
      if (!include(id)) continue;
      const column: (number | null)[] = [];
      for (let n = first; n <= this.#seq; n++) column.push(s.ring.get(n));
      values[id] = column;
    }
    return { seq: this.#seq, times, values };
  }

  /** The mean of a series' values among the newest `samples` samples, or null when it has none. */
  mean(id: string, samples: number): number | null {
    const s = this.#series.get(id);
    if (!s) return null;
    let sum = 0;
    let n = 0;
    for (let k = Math.max(1, this.#seq - Math.min(samples, this.capacity) + 1); k <= this.#seq; k++) {
      const v = s.ring.get(k);
      if (v === null) continue;
      sum += v;
      n++;
    }
    return n === 0 ? null : sum / n;
  }

  /** The newest value of a series, or null. */
  latest(id: string): number | null {
    return this.#seq === 0 ? null : (this.#series.get(id)?.ring.get(this.#seq) ?? null);
  }
}
