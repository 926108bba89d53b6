import type { Clock, ClockTimer } from '../../head/control/clock.js';

interface Timer {
  at: number;
  fn: () => void;
}

/**
 * A clock that moves only when a test moves it, for unit tests of what the head does over time
 * (back-off, grace periods, node silence): timers run inside advance(), in the order they fall due.
 */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  readonly #timers = new Map<number, Timer>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(timer: ClockTimer): void {
    this.#timers.delete(timer as number);
  }

  /** Timers set and not yet run or cleared. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`, running each timer that falls due at its own time, earliest first
   * (timers due together in the order they were set), including timers those timers set.
   */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let next: [number, Timer] | undefined;
      for (const entry of this.#timers) if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].at);
      next[1].fn();
    }
    this.#now = end;
  }

  /** Moves time forward without running anything, as a process that was stopped sees it; due timers run on the next advance. */
  stall(ms: number): void {
    this.#now += ms;
  }
}
