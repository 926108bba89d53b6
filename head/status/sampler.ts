import type { ActorStats } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import { SeriesStore } from '../state/timeseries.js';

/** How the status page names a series: `<metric>|<subject>`, subject a deployment or a GPU. */
export type Metric = 'rps' | 'p50' | 'p99' | 'queue' | 'batch' | 'util' | 'mem';
export const seriesId = (metric: Metric, subject: string): string => `${metric}|${subject}`;
/** A GPU as a series subject: `<node>/gpu<index>`. */
export const gpuSubject = (node: string, index: number): string => `${node}/gpu${index}`;
/** The subject of the cluster's aggregate of a metric (no deployment or node name can be `*`). */
export const ALL = '*';
/**
 * Per-GPU series are kept while the cluster has at most this many GPUs: past it, one line per GPU
 * tells nobody anything and 24,000 series a second would cost the head more than the page is worth.
 */
export const PER_GPU_SERIES_MAX = 12; // as charted.ts's CHART_SUBJECTS_MAX: the page draws them only up to there
/** Samples a GPU's utilisation is averaged over for its card (the node list shows it). */
const GPU_SMOOTHING = 5;

interface DeploymentMark {
  finished: number;
  recorded: number;
}

/** The last report of an actor already counted, and the process that sent it. */
interface ActorMark {
  pid: number | null;
  stats: ActorStats;
}

function quantile(sorted: Float64Array, q: number): number | null {
  return sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const ZERO: ActorStats = { calls: 0, batches: 0, rows: 0, expired: 0, failed: 0, computeMs: 0, queueMs: 0, queued: 0 };

const finishedCalls = (d: DeploymentRecord): number => d.stats.ok + [...d.stats.failed.values()].reduce((a, b) => a + b, 0);

/**
 * Turns the head's running totals into per-second series, once per `record()`:
 * - per deployment: requests/s (finished calls, ok or failed), p50/p99 latency of the calls that
 *   finished in the interval, queue length (waiting in the head plus queued inside its actors),
 *   mean batch size (rows per model execution, from the actors' own counters);
 * - per GPU: utilisation and memory used. Real GPUs report both (nvidia-smi); a simulated GPU has
 *   nothing to measure, so its utilisation is the share of the interval its actors spent
 *   computing, and its memory is left out. Kept as series only in small clusters
 *   (PER_GPU_SERIES_MAX); each GPU's last few values are kept for its card either way;
 * - for the whole cluster (subject `*`): requests/s and queue summed, p50/p99 over every call that
 *   finished, mean batch over every batch, mean GPU utilisation, GPU memory used summed: the lines
 *   the page draws when it has more deployments or GPUs than a chart can tell apart.
 */
export class ClusterSampler {
  readonly store: SeriesStore;
  readonly #state: ClusterState;
  readonly #deployments = new Map<string, DeploymentMark>();
  readonly #actors = new Map<string, ActorMark>();
  /** Each GPU's last utilisation values (newest last), by subject. */
  readonly #gpuRecent = new Map<string, number[]>();
  #lastTime = 0;
  /** Deployments and GPUs (of nodes not DEAD) at the last sample: how many lines a chart would have. */
  subjects = { deployments: 0, gpus: 0 };

  constructor(state: ClusterState, capacity = 600) {
    this.#state = state;
    this.store = new SeriesStore(capacity);
  }

  record(now = Date.now()): void {
    const dtS = this.#lastTime === 0 ? 1 : Math.max(0.001, (now - this.#lastTime) / 1000);
    this.#lastTime = now;
    const values: Record<string, number | null> = {};
    // Compute time per GPU in this interval, for simulated GPUs: key `<nodeId>/<index>`.
    const gpuBusyMs = new Map<string, number>();
    const seen = new Set<string>();
    const all = { rps: 0, queued: 0, batches: 0, rows: 0, latencies: [] as Float64Array[] };

    for (const d of this.#state.deployments.values()) {
      const name = d.spec.name;
      const mark = this.#deployments.get(name);
      const finished = finishedCalls(d);
      const latencies = d.stats.latenciesSince(mark?.recorded ?? 0).sort();
      this.#deployments.set(name, { finished, recorded: d.stats.recorded });
      values[seriesId('rps', name)] = mark ? Math.max(0, finished - mark.finished) / dtS : 0;
      all.rps += values[seriesId('rps', name)]!;
      all.latencies.push(latencies);
      values[seriesId('p50', name)] = quantile(latencies, 0.5);
      values[seriesId('p99', name)] = quantile(latencies, 0.99);

      let queued = d.dispatcher.queued;
      let batches = 0;
      let rows = 0;
      for (const a of d.actors) {
        seen.add(a.id);
        if (!a.stats) continue;
        if (a.state === 'READY' || a.state === 'DRAINING') queued += a.stats.queued;
        const before = this.#actors.get(a.id);
        // Each report is a new object: the same one means nothing new (a crashed actor keeps its
        // last report until its next process sends one). Totals count from the process's start,
        // so a report from another process than the last counted one (a new actor, or a restart)
        // counts whole: actors report only when something changed, so a first report may well
        // carry work.
        if (before?.stats === a.stats) continue;
        const base = before && before.pid === a.pid && before.stats.batches <= a.stats.batches ? before.stats : ZERO;
        this.#actors.set(a.id, { pid: a.pid, stats: a.stats });
        batches += a.stats.batches - base.batches;
        rows += a.stats.rows - base.rows;
        const computeMs = a.stats.computeMs - base.computeMs;
        if (a.nodeId !== null && computeMs > 0) {
          for (const g of a.gpus) gpuBusyMs.set(`${a.nodeId}/${g}`, (gpuBusyMs.get(`${a.nodeId}/${g}`) ?? 0) + computeMs);
        }
      }
      values[seriesId('queue', name)] = queued;
      values[seriesId('batch', name)] = batches > 0 ? rows / batches : null;
      all.queued += queued;
      all.batches += batches;
      all.rows += rows;
    }
    const latencies = Float64Array.from(all.latencies.flatMap((l) => [...l])).sort();
    values[seriesId('rps', ALL)] = all.rps;
    values[seriesId('p50', ALL)] = quantile(latencies, 0.5);
    values[seriesId('p99', ALL)] = quantile(latencies, 0.99);
    values[seriesId('queue', ALL)] = all.queued;
    values[seriesId('batch', ALL)] = all.batches > 0 ? all.rows / all.batches : null;
    for (const id of this.#actors.keys()) if (!seen.has(id)) this.#actors.delete(id);
    for (const name of this.#deployments.keys()) if (!this.#state.deployments.has(name)) this.#deployments.delete(name);

    const alive = [...this.#state.nodes.values()].filter((n) => n.state !== 'DEAD');
    const gpuCount = alive.reduce((sum, n) => sum + n.resources.gpus.length, 0);
    const perGpu = gpuCount <= PER_GPU_SERIES_MAX;
    this.subjects = { deployments: this.#state.deployments.size, gpus: gpuCount };
    const gpus = { util: 0, measured: 0, memory: 0, memoryMeasured: 0 };
    const present = new Set<string>();
    for (const n of alive) {
      for (const g of n.resources.gpus) {
        const subject = gpuSubject(n.name, g.index);
        const util = g.simulated
          ? Math.min(100, ((gpuBusyMs.get(`${n.id}/${g.index}`) ?? 0) / (dtS * 1000)) * 100)
          : (g.utilizationPct as number | null);
        if (perGpu) values[seriesId('util', subject)] = util;
        if (perGpu && !g.simulated) values[seriesId('mem', subject)] = g.memoryUsedMiB;
        if (util !== null) {
          gpus.util += util;
          gpus.measured++;
          const recent = this.#gpuRecent.get(subject) ?? [];
          recent.push(util);
          if (recent.length > GPU_SMOOTHING) recent.shift();
          this.#gpuRecent.set(subject, recent);
          present.add(subject);
        }
        if (!g.simulated && g.memoryUsedMiB !== null) {
          gpus.memory += g.memoryUsedMiB;
          gpus.memoryMeasured++;
        }
      }
    }
    for (const subject of this.#gpuRecent.keys()) if (!present.has(subject)) this.#gpuRecent.delete(subject);
    values[seriesId('util', ALL)] = gpus.measured > 0 ? gpus.util / gpus.measured : null;
    values[seriesId('mem', ALL)] = gpus.memoryMeasured > 0 ? gpus.memory : null;
    this.store.record(now, values);
  }

  /** A GPU's utilisation over its last few samples (its card's bar), or null before any. */
  gpuUtilization(node: string, index: number): number | null {
    const recent = this.#gpuRecent.get(gpuSubject(node, index));
    return recent && recent.length > 0 ? recent.reduce((a, b) => a + b, 0) / recent.length : null;
  }
}
