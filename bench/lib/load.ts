/** Latency percentiles and throughput of one closed-loop run. */
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

/**
 * Closed-loop load: `concurrency` workers each send a request, wait for its answer, and send the
 * next, for `seconds` (after `warmupSeconds` not counted). Bounded in time by construction.
 */
export async function closedLoop(
  call: () => PromiseLike<unknown>,
  options: { concurrency: number; seconds: number; warmupSeconds?: number },
): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const start = performance.now();
      try {
        await call();
        if (measuring) latencies.push(performance.now() - start);
      } catch {
        if (measuring) errors++;
      }
    }
  };
  const workers = Array.from({ length: options.concurrency }, worker);
  await new Promise((r) => setTimeout(r, (options.warmupSeconds ?? 0.5) * 1000));
  measuring = true;
  const begin = performance.now();
  await new Promise((r) => setTimeout(r, options.seconds * 1000));
  measuring = false;
  const seconds = (performance.now() - begin) / 1000;
  stop = true;
  await Promise.all(workers);
  const sorted = Float64Array.from(latencies).sort();
  return {
    concurrency: options.concurrency,
    requests: latencies.length,
    errors,
    seconds,
    rps: latencies.length / seconds,
    p50Ms: percentile(sorted, 0.5),
    p90Ms: percentile(sorted, 0.9),
    p99Ms: percentile(sorted, 0.99),
  };
}
