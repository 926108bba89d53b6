/** One histogram's cumulative buckets, read from a Prometheus text exposition. */
export function histogramBuckets(text: string, name: string): { le: number; count: number }[] {
  const buckets: { le: number; count: number }[] = [];
  const pattern = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm');
  for (const m of text.matchAll(pattern)) buckets.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]), count: Number(m[2]) });
  return buckets.sort((a, b) => a.le - b.le);
}

/**
 * The upper bound of the bucket holding quantile `q` (0..1): a histogram can say no more. Null
 * before any observation.
 */
export function bucketQuantile(buckets: { le: number; count: number }[], q: number): number | null {
  const total = buckets.at(-1)?.count ?? 0;
  if (total === 0) return null;
  const rank = q * total;
  return buckets.find((b) => b.count >= rank)?.le ?? null;
}

/** The head's placement time quantiles (ms, bucket upper bounds) and how many placements it made. */
export async function placementQuantiles(headUrl: string): Promise<{ p50Ms: number | null; p99Ms: number | null; placements: number }> {
  const text = await (await fetch(new URL('/metrics', headUrl))).text();
  const buckets = histogramBuckets(text, 'troupe_placement_duration_seconds');
  const ms = (s: number | null) => (s === null ? null : s * 1000);
  return {
    p50Ms: ms(bucketQuantile(buckets, 0.5)),
    p99Ms: ms(bucketQuantile(buckets, 0.99)),
    placements: buckets.at(-1)?.count ?? 0,
  };
}
