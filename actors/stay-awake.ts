/**
 * Keeps this process's event loop turning for a short window after a call, instead of letting it
 * sleep in the kernel: a call that comes within the window is read on the next turn, sparing it the
 * process's wake-up and the colder caches a sleeping process wakes to, which for a cheap model cost
 * more than its run (docs/performance.md#idle-spin). The loop turns by `setImmediate`, so reads,
 * timers and every other callback go on as usual while it spins; the cost is a core held for the
 * window after each call, which is why only cheap models spin by default (actors/auto-layout.ts).
 */
export class StayAwake {
  readonly #windowMs: number;
  #until = 0;
  #spinning = false;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** Whether the loop is turning now for a window not yet over. */
  get spinning(): boolean {
    return this.#spinning;
  }

  /** A call just ended: keep the loop turning for the window from now. */
  touch(): void {
    if (this.#windowMs <= 0) return;
    this.#until = performance.now() + this.#windowMs;
    if (this.#spinning) return;
    this.#spinning = true;
    setImmediate(this.#turn);
  }

  readonly #turn = (): void => {
    if (performance.now() < this.#until) setImmediate(this.#turn);
    else this.#spinning = false;
  };
}
