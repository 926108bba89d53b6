/**
 * An async actor (docs/actors.md, "Concurrent calls"): `get` awaits something slow (here a timer
 * standing in for a database or a remote model), so with `maxConcurrency` above 1 an instance runs
 * many at once, interleaved at that await. `troupe up` offers it as module `actors/lookup.js`.
 */
export class Lookup {
  #inside = 0;
  #most = 0;

  async get(key: string, ms = 100): Promise<string> {
    this.#most = Math.max(this.#most, ++this.#inside);
    try {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return key.toUpperCase();
    } finally {
      this.#inside--;
    }
  }

  /** The most calls that were inside `get` at once. */
  most(): number {
    return this.#most;
  }
}
