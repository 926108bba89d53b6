/** The first wait after a connection is lost, and the most a wait grows to. */
export const FIRST_RECONNECT_MS = 100;
export const MAX_RECONNECT_MS = 2000;

/**
 * When to try a lost peer again; one policy for every process that reconnects (an SDK client,
 * an actor and an agent to the head). Waits double from 100 ms to 2 s, each jittered by ±20% so
 * that the many actors and clients that lost the same head do not all come back in the same
 * instant. A success starts the next outage from 100 ms again.
 */
export class Reconnect {
  readonly #attempt: () => void;
  readonly #keepsProcessAlive: boolean;
  #nextMs = FIRST_RECONNECT_MS;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  /**
   * `attempt` tries once; it calls `schedule` again when it fails and `succeeded` when it does not.
   * `keepsProcessAlive: false` for a client nobody closed, whose process must not stay up just to reconnect.
   */
  constructor(attempt: () => void, options: { keepsProcessAlive: boolean }) {
    this.#attempt = attempt;
    this.#keepsProcessAlive = options.keepsProcessAlive;
  }

  /** No attempt has failed since the last success: the next wait is the first of an outage. */
  get firstOfOutage(): boolean {
    return this.#nextMs === FIRST_RECONNECT_MS;
  }

  /** Schedules the next attempt (replacing one already scheduled) and says how long it waits; 0 once stopped. */
  schedule(): number {
    if (this.#stopped) return 0;
    clearTimeout(this.#timer);
    const delay = Math.round(this.#nextMs * (0.8 + 0.4 * Math.random()));
    this.#nextMs = Math.min(this.#nextMs * 2, MAX_RECONNECT_MS);
    this.#timer = setTimeout(() => {
      if (!this.#stopped) this.#attempt();
    }, delay);
    if (!this.#keepsProcessAlive) this.#timer.unref();
    return delay;
  }

  succeeded(): void {
    this.#nextMs = FIRST_RECONNECT_MS;
  }

  /** No attempt runs after this. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
