/** Latency samples per report, at most: enough for the head's percentiles, small on the wire. */
const MAX_SAMPLES = 256;

/**
 * What an actor tells the head about the calls clients sent it directly, which the head never
 * sees: how many succeeded, and a sample of their latencies since the previous report.
 */
export class DirectCallStats {
  #ok = 0;
  #latencies: number[] = [];
  #seen = 0;

  succeeded(latencyMs: number): void {
    this.#ok++;
    // Reservoir sampling keeps the sample fair when more calls finish than it holds.
    this.#seen++;
    if (this.#latencies.length < MAX_SAMPLES) this.#latencies.push(latencyMs);
    else {
      const i = Math.floor(Math.random() * this.#seen);
      if (i < MAX_SAMPLES) this.#latencies[i] = latencyMs;
    }
  }

  /** The running count and the samples gathered since the last call. */
  report(): { directOk: number; directLatencyMs?: number[] } {
    if (this.#latencies.length === 0) return { directOk: this.#ok };
    const samples = this.#latencies.map((ms) => Math.round(ms * 1000) / 1000);
    this.#latencies = [];
    this.#seen = 0;
    return { directOk: this.#ok, directLatencyMs: samples };
  }
}
