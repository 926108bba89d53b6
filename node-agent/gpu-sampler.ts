import type { Gpu, GpuProcess } from '../runtime/internal.js';
import { queryComputeApps, queryGpus } from './gpus/index.js';

export interface GpuSample {
  gpus: Gpu[];
  processes: GpuProcess[];
}

/**
 * Samples real GPUs with nvidia-smi every few seconds (utilisation, memory, per-process memory).
 * Simulated GPUs are not sampled: there is nothing to measure, and showing zeros as if measured
 * would mislead. A failed sample keeps the last good one.
 */
export class GpuSampler {
  #latest: GpuSample | undefined;
  readonly #timer: NodeJS.Timeout | undefined;

  constructor(gpus: Gpu[], everyMs: number, command?: string) {
    if (gpus.length === 0 || gpus.every((g) => g.simulated)) return;
    const opts = command ? { command } : {};
    const sample = () =>
      Promise.all([queryGpus(opts), queryComputeApps(opts)]).then(
        ([gpus, processes]) => void (this.#latest = { gpus, processes }),
        () => {},
      );
    void sample();
    this.#timer = setInterval(() => void sample(), everyMs);
    this.#timer.unref();
  }

  get latest(): GpuSample | undefined {
    return this.#latest;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
