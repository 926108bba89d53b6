import { MODEL_VERSION } from '../../runtime/internal.js';
import type { ActorStats, ErrorCode } from '../../runtime/internal.js';
import { InferenceStatistics } from './inference-statistics.js';
import type { TritonModelStat } from './inference-statistics.js';

/** Latencies kept for percentiles: enough for a stable p99 over the last moments of traffic. */
const WINDOW = 2048;

/** A multiplexed deployment's counts for one of its models, over every replica it has had. */
export interface ModelTotals {
  loads: number;
  hits: number;
  misses: number;
  evictions: number;
  failedLoads: number;
}
const MODEL_KEYS = ['loads', 'hits', 'misses', 'evictions', 'failedLoads'] as const;

/**
 * Request outcomes and latencies of one deployment: the calls the head ran (client-facing time,
 * including the head's queue) and those clients sent to its actors directly (as the actors
 * report them: arrival to answer). Percentiles come from a ring of the most recent calls.
 */
export class DeploymentStats {
  ok = 0;
  /** Model executions (batches) and rows run by all its actors, ever: monotonic across restarts. */
  execCount = 0;
  rows = 0;
  readonly failed = new Map<ErrorCode, number>();
  /** Triton's statistics extension, from the actors' own per-call totals. */
  readonly inference = new InferenceStatistics();
  /** A multiplexed deployment's per-model counts: kept here, so they never fall when replicas are replaced. */
  readonly models = new Map<string, ModelTotals>();
  /** A multiplexed deployment's Triton statistics per model, over every replica it has had. */
  readonly tenants = new Map<string, InferenceStatistics>();
  readonly #latencies = new Float64Array(WINDOW);
  #count = 0;

  record(durationMs: number, failure?: ErrorCode): void {
    if (failure) return this.recordFailures(failure, 1);
    this.ok++;
    this.#latencies[this.#count++ % WINDOW] = durationMs;
  }

  /** Failures counted elsewhere (a front-door worker reports them in bulk). */
  recordFailures(code: ErrorCode, count: number): void {
    this.failed.set(code, (this.failed.get(code) ?? 0) + count);
  }

  /**
   * Adds what an actor ran since its previous report (a restarted actor starts from zero),
   * including the calls clients sent it directly, which the head never saw.
   */
  absorb(previous: ActorStats | null, next: ActorStats): void {
    const base = previous && previous.batches <= next.batches ? previous : { batches: 0, rows: 0, directOk: 0 };
    this.execCount += next.batches - base.batches;
    this.rows += next.rows - base.rows;
    this.ok += (next.directOk ?? 0) - (base.directOk ?? 0);
    for (const ms of next.directLatencyMs ?? []) this.#latencies[this.#count++ % WINDOW] = ms;
    if (next.totals) this.inference.absorb(base === previous ? previous?.totals : undefined, next.totals);
    this.#absorbModels(base === previous ? previous?.models : undefined, next.models);
    for (const [name, totals] of Object.entries(next.tenantTotals ?? {})) {
      let stats = this.tenants.get(name);
      if (!stats) this.tenants.set(name, (stats = new InferenceStatistics()));
      stats.absorb(base === previous ? previous?.tenantTotals?.[name] : undefined, totals);
    }
  }

  #absorbModels(previous: ActorStats['models'], next: ActorStats['models']): void {
    for (const [name, c] of Object.entries(next ?? {})) {
      const before = previous?.[name];
      const from = before && MODEL_KEYS.every((k) => (before[k] ?? 0) <= (c[k] ?? 0)) ? before : undefined;
      let total = this.models.get(name);
      if (!total) this.models.set(name, (total = { loads: 0, hits: 0, misses: 0, evictions: 0, failedLoads: 0 }));
      for (const k of MODEL_KEYS) total[k] += (c[k] ?? 0) - (from?.[k] ?? 0);
    }
  }

  /** The q-quantile (0..1) of recent successful calls' latency in ms, or null before any. */
  percentile(q: number): number | null {
    const n = Math.min(this.#count, WINDOW);
    if (n === 0) return null;
    const sorted = this.#latencies.slice(0, n).sort();
    return sorted[Math.min(n - 1, Math.floor(q * n))]!;
  }

  /** Successful calls recorded so far: a mark to pass to {@link latenciesSince} later. */
  get recorded(): number {
    return this.#count;
  }

  /** Latencies (ms) of the successful calls recorded after `mark` (at most the newest WINDOW). */
  latenciesSince(mark: number): Float64Array {
    const from = Math.max(mark, this.#count - WINDOW);
    const out = new Float64Array(Math.max(0, this.#count - from));
    for (let i = from; i < this.#count; i++) out[i - from] = this.#latencies[i % WINDOW]!;
    return out;
  }

  snapshot(): { ok: number; failed: Record<string, number>; p50Ms: number | null; p99Ms: number | null } {
    return { ok: this.ok, failed: Object.fromEntries(this.failed), p50Ms: this.percentile(0.5), p99Ms: this.percentile(0.99) };
  }

  /** These statistics in Triton's shape (`GET /v2/models/{name}/stats`), for every protocol that serves them. */
  triton(name: string): TritonModelStat {
    return this.inference.triton(name, MODEL_VERSION, this.rows, this.execCount);
  }
}
