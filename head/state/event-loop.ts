import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { IntervalHistogram } from 'node:perf_hooks';

/** The head's event-loop delay over a recent window, in milliseconds. */
export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Long enough to hold a stall a scrape every 15 s could miss, short enough that it passes. */
const WINDOW_MS = 10_000;

/**
 * How late the head's event loop ran timers: every request, heartbeat and hand-off waits on it,
 * so a stall here (a hostile body being parsed) is a stall of the whole cluster. Kept in windows
 * rather than reset per read, so /metrics scrapes and the status page do not erase each other's view.
 */
class LoopDelayMonitor {
  readonly #live: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  #last: LoopDelay | undefined;

  constructor() {
    this.#live.enable();
    setInterval(() => {
      this.#last = this.#read();
      this.#live.reset();
    }, WINDOW_MS).unref();
  }

  #read(): LoopDelay {
    const h = this.#live;
    const ms = (ns: number) => (Number.isFinite(ns) ? Math.round(ns / 1e4) / 100 : 0);
    return { p50Ms: ms(h.percentile(50)), p99Ms: ms(h.percentile(99)), maxMs: ms(h.max) };
  }

  /** The last whole window, or the one under way when none has ended; the worse of each figure. */
  read(): LoopDelay {
    const now = this.#read();
    const last = this.#last;
    if (!last) return now;
    return { p50Ms: Math.max(now.p50Ms, last.p50Ms), p99Ms: Math.max(now.p99Ms, last.p99Ms), maxMs: Math.max(now.maxMs, last.maxMs) };
  }
}

let monitor: LoopDelayMonitor | undefined;

/** This process's event-loop delay; the monitor starts on the first call (one per process). */
export function headLoopDelay(): LoopDelay {
  monitor ??= new LoopDelayMonitor();
  return monitor.read();
}
