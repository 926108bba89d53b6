import { MAX_BATCH_SIZES_REPORTED } from '../runtime/internal.js';
import type { CallTotals, DurationTotal } from '../runtime/internal.js';

/** One model execution's phases, in ms: joining the calls' inputs, the run, splitting its outputs. */
export interface ExecutionTimes {
  inputMs: number;
  inferMs: number;
  outputMs: number;
}

const add = (total: DurationTotal, count: number, ms: number) => {
  total.count += count;
  total.ms += ms;
};

/**
 * The running totals behind Triton's statistics extension (head/state/inference-statistics.ts), kept
 * where the times are known: in the actor, for every call whoever sent it (the head, a front-door
 * worker, an SDK client calling directly). Each call in a batch is charged the batch's input, run
 * and output times, as Triton charges each request; each batch size counts its executions once.
 */
export class CallTotalsRecorder {
  readonly totals: CallTotals = {
    success: { count: 0, ms: 0 },
    fail: { count: 0, ms: 0 },
    queue: { count: 0, ms: 0 },
    computeInput: { count: 0, ms: 0 },
    computeInfer: { count: 0, ms: 0 },
    computeOutput: { count: 0, ms: 0 },
    lastAt: 0,
    bySize: {},
  };

  /** `parent` gets every call too: a multiplexed replica's per-model totals add up to its own. */
  constructor(readonly parent?: CallTotalsRecorder) {}

  /** A batch ran: `queueMs` per call (arrival to the start of the run), its rows and phase times. */
  executed(queueMs: readonly number[], rows: number, times: ExecutionTimes): void {
    const t = this.totals;
    const calls = queueMs.length;
    const computeMs = times.inputMs + times.inferMs + times.outputMs;
    for (const q of queueMs) {
      add(t.queue, 1, q);
      add(t.success, 1, q + computeMs);
    }
    add(t.computeInput, calls, times.inputMs * calls);
    add(t.computeInfer, calls, times.inferMs * calls);
    add(t.computeOutput, calls, times.outputMs * calls);
    t.lastAt = Date.now();
    const key = String(rows);
    let slot = t.bySize[key];
    if (!slot) {
      // Past the bound (a model fed every size from 1 to 65,536), a new size is charged to the
      // largest size kept (integer keys enumerate in ascending order), so a report stays small:
      // that size's figures are then too high, the sums over all sizes stay right.
      const sizes = Object.keys(t.bySize);
      slot =
        sizes.length < MAX_BATCH_SIZES_REPORTED
          ? (t.bySize[key] = { count: 0, inputMs: 0, inferMs: 0, outputMs: 0 })
          : t.bySize[sizes.at(-1)!]!;
    }
    slot.count++;
    slot.inputMs += times.inputMs;
    slot.inferMs += times.inferMs;
    slot.outputMs += times.outputMs;
    this.parent?.executed(queueMs, rows, times);
  }

  /** Calls that failed (in the run, or dropped at their deadline) after `ms` each in this actor. */
  failed(ms: readonly number[]): void {
    for (const m of ms) add(this.totals.fail, 1, m);
    this.totals.lastAt = Date.now();
    this.parent?.failed(ms);
  }
}
