import type { Tensor } from '../runtime/index.js';
import type { OnnxModel } from './onnx-model.js';

interface Job {
  inputs: Record<string, Tensor>;
  outputs: readonly string[] | undefined;
  resolve: (outputs: Record<string, Tensor>) => void;
  reject: (error: unknown) => void;
}

export interface ExecutorHooks {
  /** The executor went from idle to running (sent on transitions only, not per call). */
  onBusy?: () => void;
  /** The queue drained. */
  onIdle?: () => void;
}

/**
 * Runs calls on the model one at a time, in arrival order. `session.run` blocks this thread, so
 * overlapping runs would only interleave their setImmediate hops; a queue makes the order explicit
 * and is where dynamic batching takes the next batch from.
 */
export class SerialExecutor {
  readonly #model: OnnxModel;
  readonly #hooks: ExecutorHooks;
  readonly #queue: Job[] = [];
  #running = false;
  #idleWaiters: (() => void)[] = [];

  constructor(model: OnnxModel, hooks: ExecutorHooks = {}) {
    this.#model = model;
    this.#hooks = hooks;
  }

  get queued(): number {
    return this.#queue.length;
  }

  submit(inputs: Record<string, Tensor>, outputs?: readonly string[]): Promise<Record<string, Tensor>> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ inputs, outputs, resolve, reject });
      if (!this.#running) void this.#drain();
    });
  }

  /** Resolves once everything submitted so far has run. */
  whenIdle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async #drain(): Promise<void> {
    this.#running = true;
    this.#hooks.onBusy?.();
    while (this.#queue.length > 0) {
      const job = this.#queue.shift()!;
      try {
        job.resolve(await this.#model.run(job.inputs, job.outputs));
      } catch (err) {
        job.reject(err);
      }
    }
    this.#running = false;
    this.#hooks.onIdle?.();
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }
}
