import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import { RunNotStarted } from './batcher.js';
import type { OnnxModel } from './onnx-model.js';

/**
 * The one instance of a model's several (model-instances.ts) whose session runs on the actor's
 * main thread, between the reads of the sockets, as a replica of one instance does. N sessions
 * then take N threads, not N + 1: a main thread that only did I/O would take its turns on the
 * cores from the sessions' threads, each turn a switch in the middle of a run.
 *
 * A run starts in a later turn of the event loop, never inside `run()`: `session.run` blocks
 * this thread, and the batcher first sends the runs it has ready to the other instances, so
 * their threads have work while this one is busy. It holds one run at a time.
 */
export class MainThreadInstance {
  readonly overlap = 1;
  readonly #model: Pick<OnnxModel, 'metadata' | 'run' | 'release'>;
  #running: Promise<unknown> | undefined;

  constructor(model: Pick<OnnxModel, 'metadata' | 'run' | 'release'>) {
    this.#model = model;
  }

  get metadata(): ModelMetadata {
    return this.#model.metadata;
  }

  get pendingRuns(): number {
    return this.#running ? 1 : 0;
  }

  /** `notAfter`: see RunModel (actors/batcher.ts); past it when its turn comes, the run rejects with RunNotStarted. */
  run(inputs: Record<string, Tensor>, outputs?: readonly string[], notAfter?: number): Promise<Record<string, Tensor>> {
    const result = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => {
        if (notAfter !== undefined && performance.timeOrigin + performance.now() > notAfter)
          throw new RunNotStarted('its deadline passed before its turn');
        return this.#model.run(inputs, outputs);
      })
      .finally(() => {
        if (this.#running === ended) this.#running = undefined;
      });
    const ended = result.catch(() => undefined);
    this.#running = ended;
    return result;
  }

  runGoingOn(): Promise<unknown> | undefined {
    return this.#running;
  }

  release(): Promise<void> {
    return this.#model.release();
  }
}
