/** The budget where --max-body-mib is smaller: a few large bodies read at once, not dozens. */
export const LARGE_BODIES_BYTES = 64 * 2 ** 20;

/** The longest a body waits for room: past it, it is read anyway, over the budget. */
export const MAX_BODY_WAIT_MS = 2000;

/**
 * The bytes of large request bodies the head holds while it reads them, across every route: a
 * body past the budget waits, its socket unread (TCP pushes back on its client), until earlier
 * bodies are read and handed to the body thread. Fourteen 29 MB bodies began at once had the head
 * allocate 400 MB in one turn, and V8's collector, pressed by that much outside its heap, paused
 * the event loop for tens of milliseconds while they were read. A body waits at most `maxWaitMs`:
 * clients that drip their bodies while holding the budget delay others' by that much, no more.
 */
export class BodyBudget {
  readonly #total: number;
  readonly #maxWaitMs: number;
  #free: number;
  readonly #waiting: { bytes: number; start: () => void }[] = [];

  constructor(total: number, maxWaitMs = MAX_BODY_WAIT_MS) {
    this.#total = total;
    this.#maxWaitMs = maxWaitMs;
    this.#free = total;
  }

  /**
   * Calls `start` once `bytes` fit, in the order asked (at once if nothing waits and they fit; a
   * body larger than the whole budget goes when it is alone). Returns what gives the bytes back,
   * or withdraws the ask if it is still waiting; calling it again does nothing.
   */
  take(bytes: number, start: () => void): () => void {
    const ask = { bytes, start };
    this.#waiting.push(ask);
    let started = false;
    let done = false;
    let overdue: NodeJS.Timeout | undefined;
    ask.start = () => {
      clearTimeout(overdue);
      started = true;
      start();
    };
    this.#next();
    if (!started)
      overdue = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(ask), 1);
        this.#free -= Math.min(bytes, this.#total);
        ask.start();
      }, this.#maxWaitMs).unref();
    return () => {
      if (done) return;
      done = true;
      if (!started) {
        clearTimeout(overdue);
        this.#waiting.splice(this.#waiting.indexOf(ask), 1);
        return;
      }
      this.#free += Math.min(bytes, this.#total);
      this.#next();
    };
  }

  #next(): void {
    for (let ask = this.#waiting[0]; ask; ask = this.#waiting[0]) {
      const bytes = Math.min(ask.bytes, this.#total);
      if (bytes > this.#free) return;
      this.#free -= bytes;
      this.#waiting.shift();
      ask.start();
    }
  }
}
