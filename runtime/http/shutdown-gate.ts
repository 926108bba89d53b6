import { TroupeError } from '../errors.js';

/**
 * Graceful shutdown of the head: once draining starts, new work (runs, inferences, deploys) is
 * refused with the retryable TROUPE_ERR_SHUTTING_DOWN, so a client retries it against the next
 * head or another one, while the work already accepted finishes. `drain` resolves when nothing is
 * in flight, or when its bound passes, whichever comes first: a stuck call cannot hold a shutdown
 * forever.
 */
export class ShutdownGate {
  #inFlight = 0;
  #draining = false;
  #idle: (() => void)[] = [];

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Counts one piece of accepted work until the returned function is called (once; later calls do
   * nothing). For callers that cannot hand over a promise, e.g. an HTTP response that ends when
   * its socket says so. Check `draining` first: this does not refuse.
   */
  enter(): () => void {
    this.#inFlight++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      if (--this.#inFlight === 0) for (const wake of this.#idle.splice(0)) wake();
    };
  }

  /** Runs `work` as accepted work, or refuses it at once when the head is draining. */
  run<T>(what: string, work: () => Promise<T>): Promise<T> {
    if (this.#draining)
      return Promise.reject(
        new TroupeError(
          'TROUPE_ERR_SHUTTING_DOWN',
          `the head is shutting down and takes no new work (${what}); retry against it once it is back`,
        ),
      );
    this.#inFlight++;
    let result: Promise<T>;
    try {
      result = work();
    } catch (err) {
      result = Promise.reject(err);
    }
    return result.finally(() => {
      if (--this.#inFlight === 0) for (const wake of this.#idle.splice(0)) wake();
    });
  }

  /** Stops accepting work; resolves once the accepted work is done or `timeoutMs` has passed. */
  drain(timeoutMs: number): Promise<{ unfinished: number }> {
    this.#draining = true;
    if (this.#inFlight === 0) return Promise.resolve({ unfinished: 0 });
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ unfinished: this.#inFlight }), timeoutMs);
      this.#idle.push(() => {
        clearTimeout(timer);
        resolve({ unfinished: 0 });
      });
    });
  }
}
