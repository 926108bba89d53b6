/**
 * At most `limit` tasks at once, the rest queued in order. The simulated fleet opens its
 * connections through one: thousands of connects in the same millisecond overflow the head's
 * listen backlog (Node's default, 511), the kernel drops the SYNs, and each dropped connect
 * waits out TCP's retry back-off (1 s, 3 s, 7 s, ...), which would measure the kernel, not the head.
 * Real actors arrive spread out anyway: each is a process that spawns and loads a model first.
 */
export class Limiter {
  readonly #limit: number;
  #running = 0;
  readonly #queue: (() => void)[] = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#limit) await new Promise<void>((resolve) => this.#queue.push(resolve));
    this.#running++;
    try {
      return await task();
    } finally {
      this.#running--;
      this.#queue.shift()?.();
    }
  }
}
