/**
 * Bounds how long scheduling holds the event loop in one turn. Sixty deploys arriving together at
 * 3,000 nodes each rank every node once (ActorsByNode.best): seconds of work in a row, during which
 * no heartbeat, start answer or request was read (bench/scale/HISTORY.md). Once a turn has spent
 * `sliceMs` placing, the rest waits for a pass in a later turn (setImmediate, after the loop has
 * polled its sockets once more); every pass still finishes at least one deployment, so the work
 * always moves on. Measured with the real clock, whatever clock the controller's timers run on.
 */
export class SchedulingTurns {
  readonly #sliceMs: number;
  readonly #pass: () => void;
  #spentMs = 0;
  #placed = false;
  #reset: NodeJS.Immediate | undefined;
  #deferred: NodeJS.Immediate | undefined;

  /** @param pass runs a whole scheduling pass again when one was cut short. */
  constructor(sliceMs: number, pass: () => void) {
    this.#sliceMs = sliceMs;
    this.#pass = pass;
  }

  /** A pass is already due in a later turn: it will see whatever is PENDING, so another need not run now. */
  get due(): boolean {
    return this.#deferred !== undefined;
  }

  /**
   * Whether this turn's slice is used up, counting `runningMs` of the pass under way; if it is,
   * a pass is made due in a later turn and the caller stops. The first deployment placed in a
   * turn always goes ahead (`placedThisPass` false and nothing placed earlier in the turn), so
   * the work moves on however small the slice.
   */
  spent(runningMs: number, placedThisPass: boolean): boolean {
    if (!placedThisPass && !this.#placed) return false;
    if (this.#spentMs + runningMs < this.#sliceMs) return false;
    this.#resetLater();
    this.#deferred ??= setImmediate(() => {
      this.#deferred = undefined;
      this.#pass();
    });
    return true;
  }

  /** Counts `ms` of scheduling against this turn; `placed`: the pass placed (or refused) something. */
  add(ms: number, placed: boolean): void {
    this.#spentMs += ms;
    this.#placed ||= placed;
    this.#resetLater();
  }

  /** Queued before any pass deferred from this turn (immediates run in order), so that pass starts with a fresh slice. */
  #resetLater(): void {
    this.#reset ??= setImmediate(() => {
      this.#reset = undefined;
      this.#spentMs = 0;
      this.#placed = false;
    });
  }

  close(): void {
    clearImmediate(this.#reset);
    clearImmediate(this.#deferred);
    this.#reset = this.#deferred = undefined;
  }
}
