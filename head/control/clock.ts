/**
 * The controller's and liveness's view of time: what it is now, and a callback later. Production
 * uses {@link systemClock}; unit tests drive a manual one, so back-off, grace periods and node
 * silence are tested by moving time, not by waiting for it.
 */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

/** A timer as the clock that made it knows it: only that clock can clear it. */
export type ClockTimer = unknown;

/** Wall-clock time and Node's own timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout),
};
