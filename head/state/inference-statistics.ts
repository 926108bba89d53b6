import type { BatchSizeTotals, CallTotals, DurationTotal } from '../../runtime/internal.js';

/** Triton's `$duration_stat`: a count and a total in nanoseconds. */
export interface DurationStat {
  count: number;
  ns: number;
}

/** Triton's `$model_stat` (statistics extension), for one deployment and its one version. */
export interface TritonModelStat {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<
    'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output' | 'cache_hit' | 'cache_miss',
    DurationStat
  >;
  batch_stats: { batch_size: number; compute_input: DurationStat; compute_infer: DurationStat; compute_output: DurationStat }[];
}

type Phase = 'success' | 'fail' | 'queue' | 'computeInput' | 'computeInfer' | 'computeOutput';
const PHASES: Phase[] = ['success', 'fail', 'queue', 'computeInput', 'computeInfer', 'computeOutput'];

const zeroDuration = (): DurationTotal => ({ count: 0, ms: 0 });
const ns = (ms: number) => Math.round(ms * 1e6);
const stat = (d: DurationTotal): DurationStat => ({ count: d.count, ns: ns(d.ms) });

/**
 * A deployment's statistics since the head started: the sum of what each of its actors reported
 * (actors/call-totals.ts), so every call counts whichever way it came (the head's queue, a
 * front-door worker, an SDK client calling a replica directly). Actors report running totals; a
 * restarted actor starts again from zero, so only increases are added, as the head does for its
 * other counters (deployment-stats.ts).
 */
export class InferenceStatistics {
  readonly #phases = Object.fromEntries(PHASES.map((p) => [p, zeroDuration()])) as Record<Phase, DurationTotal>;
  readonly #bySize = new Map<number, BatchSizeTotals>();
  #lastAt = 0;

  /** Adds what an actor ran between two of its reports (`previous` null: its first, or after a restart). */
  absorb(previous: CallTotals | undefined, next: CallTotals): void {
    const base = previous && previous.success.count <= next.success.count && previous.fail.count <= next.fail.count ? previous : undefined;
    for (const p of PHASES) {
      this.#phases[p].count += next[p].count - (base?.[p].count ?? 0);
      this.#phases[p].ms += next[p].ms - (base?.[p].ms ?? 0);
    }
    for (const [key, size] of Object.entries(next.bySize)) {
      const before = base?.bySize[key];
      const total = this.#bySize.get(Number(key)) ?? { count: 0, inputMs: 0, inferMs: 0, outputMs: 0 };
      total.count += size.count - (before?.count ?? 0);
      total.inputMs += size.inputMs - (before?.inputMs ?? 0);
      total.inferMs += size.inferMs - (before?.inferMs ?? 0);
      total.outputMs += size.outputMs - (before?.outputMs ?? 0);
      this.#bySize.set(Number(key), total);
    }
    this.#lastAt = Math.max(this.#lastAt, next.lastAt);
  }

  /**
   * Triton's shape with the rows and executions counted from the batch sizes: for one model of a
   * multiplexed set, whose replica reports no other count per model.
   */
  tritonBySize(name: string, version: string): TritonModelStat {
    let rows = 0;
    let executions = 0;
    for (const [size, s] of this.#bySize) {
      rows += size * s.count;
      executions += s.count;
    }
    return this.triton(name, version, rows, executions);
  }

  /**
   * Triton's shape. `rows` and `executions` are the deployment's monotonic counts of rows run and
   * model executions (inference_count counts rows, as Triton's does: one request of 64 rows to a batching deployment is 64).
   */
  triton(name: string, version: string, rows: number, executions: number): TritonModelStat {
    const p = this.#phases;
    return {
      name,
      version,
      last_inference: this.#lastAt,
      inference_count: rows,
      execution_count: executions,
      inference_stats: {
        success: stat(p.success),
        fail: stat(p.fail),
        queue: stat(p.queue),
        compute_input: stat(p.computeInput),
        compute_infer: stat(p.computeInfer),
        compute_output: stat(p.computeOutput),
        // Troupe has no response cache: nothing is ever a hit or a miss.
        cache_hit: { count: 0, ns: 0 },
        cache_miss: { count: 0, ns: 0 },
      },
      batch_stats: [...this.#bySize]
        .sort(([a], [b]) => a - b)
        .map(([batchSize, s]) => ({
          batch_size: batchSize,
          compute_input: { count: s.count, ns: ns(s.inputMs) },
          compute_infer: { count: s.count, ns: ns(s.inferMs) },
          compute_output: { count: s.count, ns: ns(s.outputMs) },
        })),
    };
  }
}
