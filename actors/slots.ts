interface Job {
  exclusive: boolean;
  start: () => void;
}

/**
 * The calls of one class instance: up to `limit` run at once, started strictly in the order they
 * arrived (a call never overtakes one that waits, so with a limit of 1 each call starts after the
 * one before it ended, however it ended). An exclusive job (a restore) runs alone: it waits for
 * every running call, and nothing behind it starts until it ends.
 */
export class Slots {
  readonly #limit: number;
  readonly #waiting: Job[] = [];
  #running = 0;
  #exclusive = false;

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a slot limit is a whole number of at least 1, got ${limit}`);
    this.#limit = limit;
  }

  /** Jobs waiting or running. */
  get queued(): number {
    return this.#waiting.length + this.#running;
  }

  /** Jobs running now. */
  get running(): number {
    return this.#running;
  }

  /**
   * Runs `work` once a slot is free and every job before it has started; settles as it does.
   * A job whose `signal` aborts while it waits leaves the queue unrun and rejects with the
   * signal's reason (once started, stopping is `work`'s business).
   */
  run<T>(exclusive: boolean, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<T>((resolve, reject) => {
      const drop = () => {
        const at = this.#waiting.indexOf(job);
        if (at < 0) return;
        this.#waiting.splice(at, 1);
        reject(signal!.reason as Error);
        // An exclusive job that left may have held the ones behind it back.
        this.#drain();
      };
      const job: Job = {
        exclusive,
        start: () => {
          signal?.removeEventListener('abort', drop);
          this.#running++;
          this.#exclusive = exclusive;
          // A job that throws synchronously frees its slot as one that rejects does.
          Promise.resolve()
            .then(work)
            .then(resolve, reject)
            .finally(() => {
              this.#running--;
              if (this.#running === 0) this.#exclusive = false;
              this.#drain();
            });
        },
      };
      signal?.addEventListener('abort', drop, { once: true });
      this.#waiting.push(job);
      this.#drain();
    });
  }

  #drain(): void {
    while (this.#waiting.length > 0 && !this.#exclusive && this.#running < this.#limit) {
      if (this.#waiting[0]!.exclusive && this.#running > 0) return;
      this.#waiting.shift()!.start();
    }
  }
}
