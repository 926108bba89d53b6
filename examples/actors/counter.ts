/**
 * A class actor for docs/actors.md: a running total that keeps checkpoints, so a restarted
 * instance carries on from its last call, and an async generator method that streams. `troupe up`
 * offers it as module `actors/counter.js` (its agent's --module-dir is dist/examples/).
 */
export class Counter {
  #total: number;

  constructor(start = 0) {
    this.#total = start;
  }

  add(n: number): number {
    this.#total += n;
    return this.#total;
  }

  total(): number {
    return this.#total;
  }

  /** Streams 0 … n-1, one item as each is made. */
  async *count(n: number): AsyncGenerator<number> {
    for (let i = 0; i < n; i++) yield i;
  }

  /** Kept by the head after every call; handed to restore() after a restart. */
  checkpoint(): { total: number } {
    return { total: this.#total };
  }

  restore(state: { total: number }): void {
    this.#total = state.total;
  }

  /** Shown on the status page's State column. */
  stateSize(): number {
    return 8;
  }
}
