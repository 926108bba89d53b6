import type { LoadResult } from './load.js';

export const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** One markdown table of load results; `ratioTo` adds a column of throughput over a baseline. */
export function loadTable(rows: { label: string; result: LoadResult; ratioTo?: number }[]): string {
  const lines = [
    '| path | concurrency | req/s | p50 ms | p90 ms | p99 ms | errors | vs floor |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const { label, result: r, ratioTo } of rows) {
    const ratio = ratioTo ? `${fmt(r.rps / ratioTo, 2)}x` : '';
    lines.push(
      `| ${label} | ${r.concurrency} | ${fmt(r.rps)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p90Ms, 3)} | ${fmt(r.p99Ms, 3)} | ${r.errors} | ${ratio} |`,
    );
  }
  return lines.join('\n');
}
