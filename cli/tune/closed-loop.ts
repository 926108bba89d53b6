/** Throughput and latency percentiles of one closed-loop run (latencies from performance.now: microsecond resolution). */
export interface LoadResult {
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
}

export function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Unmeasured seconds before a run at concurrency above 1. */
const WARMUP_SECONDS = 0.5;
/** At concurrency 1, warm-up windows of this length until their p50s agree (at most MAX_WARMUP_WINDOWS). */
const WINDOW_SECONDS = 1;
const MAX_WARMUP_WINDOWS = 15;

/**
 * Whether the last three warm-up windows' p50 latencies agree within 10% of their mean: the
 * stability rule of Triton's perf_analyzer. At concurrency 1 a few hundred calls are not enough
 * for V8 to optimise every function on the path (a cold HTTP path's p50 halves over its first
 * ten seconds on a 2-core machine), and the figures are meant for a server that has been up.
 */
function stable(p50s: number[]): boolean {
  if (p50s.length < 3) return false;
  const last = p50s.slice(-3);
  const mean = (last[0]! + last[1]! + last[2]!) / 3;
  return last.every((p) => Math.abs(p - mean) <= 0.1 * mean);
}

/**
 * Closed-loop load: `concurrency` workers each send a request, wait for its answer, and send the
 * next, for `seconds`, after a warm-up that is not counted (`warmupSeconds`, or by default 0.5 s,
 * and at concurrency 1 until stable, at most 15 s). Bounded in time by construction. Used by
 * `troupe tune` and the benchmarks (bench/lib/load.ts).
 */
export async function closedLoop(
  call: () => PromiseLike<unknown>,
  options: { concurrency: number; seconds: number; warmupSeconds?: number },
): Promise<LoadResult> {
  let latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const start = performance.now();
      try {
        await call();
        latencies.push(performance.now() - start);
      } catch {
        if (measuring) errors++;
      }
    }
  };
  const workers = Array.from({ length: options.concurrency }, worker);
  const sleep = (seconds: number) => new Promise((r) => setTimeout(r, seconds * 1000));
  if (options.warmupSeconds !== undefined || options.concurrency > 1) await sleep(options.warmupSeconds ?? WARMUP_SECONDS);
  else {
    const p50s: number[] = [];
    while (!stable(p50s) && p50s.length < MAX_WARMUP_WINDOWS) {
      latencies = [];
      await sleep(WINDOW_SECONDS);
      p50s.push(percentile(Float64Array.from(latencies).sort(), 0.5));
    }
  }
  latencies = [];
  measuring = true;
  const begin = performance.now();
  await sleep(options.seconds);
  measuring = false;
  // Calls that finish after the window are not counted.
  const measured = latencies;
  latencies = [];
  const seconds = (performance.now() - begin) / 1000;
  stop = true;
  await Promise.all(workers);
  const sorted = Float64Array.from(measured).sort();
  return {
    concurrency: options.concurrency,
    requests: measured.length,
    errors,
    seconds,
    rps: measured.length / seconds,
    p50Ms: percentile(sorted, 0.5),
    p90Ms: percentile(sorted, 0.9),
    p99Ms: percentile(sorted, 0.99),
  };
}
