/**
 * An actor with concurrency groups (docs/actors.md, "Concurrency groups"), as Ray's
 * `@ray.remote(concurrency_groups={"io": 4, "compute": 1})` class: `fetch` waits on the network
 * (here a timer), many at once in group `io`; `parse` works on the instance's state, one at a
 * time in `compute`; `most` runs in `default`, so it is answered while both are busy. `troupe up`
 * offers it as module `actors/crawler.js`.
 */
export class Crawler {
  static concurrencyGroups = {
    io: { maxConcurrency: 4, methods: ['fetch'] },
    compute: { maxConcurrency: 1, methods: ['parse'] },
  };

  #inside: Record<string, number> = { fetch: 0, parse: 0 };
  #most: Record<string, number> = { fetch: 0, parse: 0 };
  #words = 0;

  async #counted<T>(method: string, work: () => Promise<T>): Promise<T> {
    this.#most[method] = Math.max(this.#most[method]!, ++this.#inside[method]!);
    try {
      return await work();
    } finally {
      this.#inside[method]!--;
    }
  }

  fetch(url: string, ms = 100): Promise<string> {
    return this.#counted('fetch', async () => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return `<p>the page at ${url}</p>`;
    });
  }

  parse(html: string): Promise<number> {
    return this.#counted('parse', async () => {
      const words = html
        .replace(/<[^>]*>/g, ' ')
        .split(/\s+/)
        .filter(Boolean).length;
      await new Promise((resolve) => setImmediate(resolve));
      this.#words += words;
      return words;
    });
  }

  /** The most calls that were inside each method at once, and the words parsed so far. */
  most(): { fetch: number; parse: number; words: number } {
    return { fetch: this.#most.fetch!, parse: this.#most.parse!, words: this.#words };
  }
}
