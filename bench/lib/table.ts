import type { LoadResult } from './load.js';

export const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/**
 * One markdown table of load results; `ratioTo` adds a column of throughput over a baseline, and
 * `ratioTo2`, where any row has one, a second column over a second baseline ('vs second').
 */
export function loadTable(rows: { label: string; result: LoadResult; ratioTo?: number; ratioTo2?: number }[]): string {
  const second = rows.some((r) => r.ratioTo2 !== undefined);
  const lines = [
    `| path | concurrency | req/s | p50 ms | p90 ms | p99 ms | errors | vs floor |${second ? ' vs second |' : ''}`,
    `| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |${second ? ' ---: |' : ''}`,
  ];
  const ratio = (r: LoadResult, to: number | undefined) => (to ? `${fmt(r.rps / to, 2)}x` : '');
  for (const { label, result: r, ratioTo, ratioTo2 } of rows) {
    lines.push(
      `| ${label} | ${r.concurrency} | ${fmt(r.rps)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p90Ms, 3)} | ${fmt(r.p99Ms, 3)} | ${r.errors} | ${ratio(r, ratioTo)} |${second ? ` ${ratio(r, ratioTo2)} |` : ''}`,
    );
  }
  return lines.join('\n');
}
