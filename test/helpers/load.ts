import { TroupeError } from '../../runtime/internal.js';
import type { Cluster, RunInputs, RunOptions } from '../../runtime/internal.js';

export interface LoadOutcome {
  sent: number;
  ok: number;
  /** Failures with a retryable code, by code. */
  retryable: Record<string, number>;
  /** Failures that are not retryable (or not TroupeErrors at all): these break the guarantee. */
  fatal: string[];
}

export function retryableCount(o: LoadOutcome): number {
  return Object.values(o.retryable).reduce((a, b) => a + b, 0);
}

/**
 * Steady load from one client: `concurrency` workers, each sending its next call as soon as the
 * previous one settles, so about that many calls are always in flight. Every call is counted
 * exactly once, by its outcome. `stop` stops sending and waits for the calls in flight.
 */
export class SteadyLoad {
  readonly outcome: LoadOutcome = { sent: 0, ok: 0, retryable: {}, fatal: [] };
  readonly #workers: Promise<void>[] = [];
  #running = true;

  constructor(
    client: Cluster,
    deployment: string,
    inputs: (i: number) => RunInputs,
    options: { concurrency: number; run?: RunOptions; check?: (outputs: Record<string, unknown>, i: number) => string | undefined },
  ) {
    for (let w = 0; w < options.concurrency; w++) {
      this.#workers.push(
        (async () => {
          while (this.#running) {
            const i = this.outcome.sent++;
            try {
              const out = await client.run(deployment, inputs(i), options.run);
              const wrong = options.check?.(out, i);
              if (wrong) this.outcome.fatal.push(`call ${i}: ${wrong}`);
              else this.outcome.ok++;
            } catch (err) {
              if (err instanceof TroupeError && err.retryable)
                this.outcome.retryable[err.code] = (this.outcome.retryable[err.code] ?? 0) + 1;
              else this.outcome.fatal.push(err instanceof TroupeError ? `${err.code}: ${err.message}` : String(err));
              // A failed call comes back at once; pause so a worker does not spin while nothing can serve.
              await new Promise((r) => setTimeout(r, 20));
            }
          }
        })(),
      );
    }
  }

  /** Calls answered so far (ok or failed). */
  get settled(): number {
    return this.outcome.ok + retryableCount(this.outcome) + this.outcome.fatal.length;
  }

  async stop(): Promise<LoadOutcome> {
    this.#running = false;
    await Promise.all(this.#workers);
    return this.outcome;
  }
}

/** Waits (bounded, polling) until `load` has `more` additional successful calls. */
export async function progress(load: SteadyLoad, more: number, timeoutMs = 30_000): Promise<void> {
  const target = load.outcome.ok + more;
  const deadline = Date.now() + timeoutMs;
  while (load.outcome.ok < target) {
    if (Date.now() > deadline)
      throw new Error(
        `the load made no progress: ${load.outcome.ok} of ${target} calls ok after ${timeoutMs} ms (${JSON.stringify(load.outcome.retryable)}; ${load.outcome.fatal.slice(0, 3).join(' | ')})`,
      );
    await new Promise((r) => setTimeout(r, 25));
  }
}
