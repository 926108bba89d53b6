import { Worker } from 'node:worker_threads';
import { TroupeError, fromWireError, sharedBufferPool } from '../runtime/internal.js';
import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import type { FromInferenceThread, InferenceThreadStart, ToInferenceThread } from './inference-thread-messages.js';
import { RunNotStarted } from './batcher.js';
import { moveInputs, tensorsOf } from './moved-tensors.js';
import type { LoadOptions } from './onnx-model.js';

interface PendingRun {
  resolve: (outputs: Record<string, Tensor>) => void;
  reject: (error: unknown) => void;
  /** Settles with the run, either way. */
  ended: Promise<unknown>;
}

/** What the actor does when its inference thread dies under it: the process cannot serve any more. */
export type OnThreadDeath = (error: TroupeError) => void;

/**
 * One onnxruntime session on a thread of its own (actors/inference-worker.ts), so that the
 * actor's main thread is free while a batch infers: it reads the next bodies, parses them and
 * queues them, and the model never waits for a socket nor a socket for the model. Inputs are
 * copied once into buffers that are moved (not cloned) to the thread and come back for reuse;
 * outputs are moved back as onnxruntime allocated them.
 *
 * An error of a run (onnxruntime refused the inputs) fails that run's calls and nothing else, as
 * in one thread. The thread dying (an uncaught error, an exit) fails every run in it and every
 * later one with TROUPE_ERR_ACTOR_DIED and tells `onDeath`: the actor then exits, and its agent
 * restarts it as after any crash.
 */
export class ThreadedModel {
  readonly metadata: ModelMetadata;
  readonly provider: string;
  /** A lone call's run at the declared shape, measured on the thread at load (ms). */
  readonly runMs: number;
  /**
   * Two runs at once: the second waits in the thread's queue and starts the moment the first
   * ends, with no hop back to the main thread between them (the batcher sends only full batches ahead).
   */
  readonly overlap = 2;
  readonly #worker: Worker;
  readonly #pending = new Map<number, PendingRun>();
  #nextId = 1;
  #dead: TroupeError | undefined;
  #releasing = false;

  private constructor(worker: Worker, loaded: Extract<FromInferenceThread, { type: 'loaded' }>, onDeath: OnThreadDeath | undefined) {
    this.#worker = worker;
    this.metadata = loaded.metadata;
    this.provider = loaded.provider;
    this.runMs = loaded.runMs;
    worker.on('message', (message: FromInferenceThread) => this.#answer(message));
    worker.on('error', (err) => this.#died(`threw: ${err.message}`, onDeath));
    worker.on('exit', (code) => {
      if (!this.#releasing) this.#died(`exited with code ${code}`, onDeath);
    });
  }

  /** Starts the thread, which loads and warms up the model; fails with TROUPE_ERR_MODEL_LOAD as a load in this thread would. */
  static load(path: string, options: LoadOptions, onDeath?: OnThreadDeath): Promise<ThreadedModel> {
    const start: InferenceThreadStart = { path, options };
    const worker = new Worker(new URL('./inference-worker.js', import.meta.url), { workerData: start });
    return new Promise((resolve, reject) => {
      const failed = (why: string) => {
        settle();
        void worker.terminate();
        reject(new TroupeError('TROUPE_ERR_MODEL_LOAD', `the inference thread for '${path}' ${why}`));
      };
      const onError = (err: Error) => failed(`threw while loading: ${err.message}`);
      const onExit = (code: number) => failed(`exited with code ${code} while loading`);
      const onMessage = (message: FromInferenceThread) => {
        if (message.type === 'loadFailed') {
          settle();
          void worker.terminate();
          reject(fromWireError(message.error));
        } else if (message.type === 'loaded') {
          settle();
          resolve(new ThreadedModel(worker, message, onDeath));
        }
      };
      const settle = () => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    });
  }

  /** `notAfter`: see RunModel (actors/batcher.ts); past it before its turn, the run rejects with RunNotStarted. */
  run(inputs: Record<string, Tensor>, outputs?: readonly string[], notAfter?: number): Promise<Record<string, Tensor>> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    const { moved, transfer } = moveInputs(inputs, sharedBufferPool);
    let resolve!: PendingRun['resolve'];
    let reject!: PendingRun['reject'];
    const result = new Promise<Record<string, Tensor>>((yes, no) => ((resolve = yes), (reject = no)));
    this.#pending.set(id, { resolve, reject, ended: result.catch(() => undefined) });
    this.#post({ type: 'run', id, inputs: moved, outputs, notAfter }, transfer);
    return result;
  }

  /** Runs sent and not yet answered: the one going on and those waiting behind it. */
  get pendingRuns(): number {
    return this.#pending.size;
  }

  /** The end of the run the thread is on now (the oldest unanswered: the thread serves them in order), if any. */
  runGoingOn(): Promise<unknown> | undefined {
    for (const run of this.#pending.values()) return run.ended;
    return undefined;
  }

  /** Ends the session and the thread; runs still in it fail as after a death, without telling anyone. */
  async release(): Promise<void> {
    if (this.#releasing) return;
    this.#releasing = true;
    if (!this.#dead) {
      const released = new Promise<void>((resolve) => {
        this.#worker.on('message', (m: FromInferenceThread) => m.type === 'released' && resolve());
        this.#worker.once('exit', () => resolve());
      });
      this.#post({ type: 'release' });
      await released;
    }
    await this.#worker.terminate();
    this.#died('was released', undefined);
  }

  #post(message: ToInferenceThread, transfer: ArrayBuffer[] = []): void {
    this.#worker.postMessage(message, transfer);
  }

  #answer(message: FromInferenceThread): void {
    if (message.type !== 'result' && message.type !== 'failed' && message.type !== 'skipped') return;
    // The input buffers came back: the next call's inputs are copied into them.
    for (const buffer of message.inputs) sharedBufferPool.give(new Uint8Array(buffer));
    const run = this.#pending.get(message.id);
    if (!run) return;
    this.#pending.delete(message.id);
    if (message.type === 'result') run.resolve(tensorsOf(message.outputs));
    else if (message.type === 'skipped') run.reject(new RunNotStarted('its deadline passed before its turn'));
    else run.reject(fromWireError(message.error));
  }

  #died(why: string, onDeath: OnThreadDeath | undefined): void {
    if (this.#dead) return;
    this.#dead = new TroupeError('TROUPE_ERR_ACTOR_DIED', `the inference thread of this actor ${why}; the actor restarts`);
    for (const run of this.#pending.values()) run.reject(this.#dead);
    this.#pending.clear();
    onDeath?.(this.#dead);
  }
}
