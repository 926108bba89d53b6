import type { LoadResult } from './load.js';

/** The middle value of `xs` (the upper of the two middle ones for an even count). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A benchmark's report: each line printed as it comes, and kept in `lines` for its RESULTS file. */
export function report(): { say: (text: string) => void; lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    say: (text) => {
      lines.push(text);
      process.stdout.write(`${text}\n`);
    },
  };
}

/** Runs of one path taken in turns with others, as one: each figure the median of the runs', requests and errors summed. */
export function medianLoad(runs: readonly LoadResult[]): LoadResult {
  const of = (f: (r: LoadResult) => number) => median(runs.map(f));
  const sum = (f: (r: LoadResult) => number) => runs.reduce((n, r) => n + f(r), 0);
  return {
    concurrency: runs[0]!.concurrency,
    requests: sum((r) => r.requests),
    errors: sum((r) => r.errors),
    seconds: sum((r) => r.seconds),
    rps: of((r) => r.rps),
    p50Ms: of((r) => r.p50Ms),
    p90Ms: of((r) => r.p90Ms),
    p99Ms: of((r) => r.p99Ms),
  };
}
