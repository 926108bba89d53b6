import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import { MainThreadInstance } from './main-thread-instance.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';
import { ThreadedModel } from './threaded-model.js';
import type { OnThreadDeath } from './threaded-model.js';

type Instance = ThreadedModel | MainThreadInstance;

/**
 * Several instances of one model in one actor (Triton's instance_group count): N sessions, so the
 * replica runs that many batches at once. On a CPU, N sessions of one intra-op thread each keep N
 * cores busy with no barrier between them, where one session of N threads meets at a barrier after
 * every parallel section and waits there for any thread the actor's I/O or another process delayed
 * (docs/performance.md#model-instances). N - 1 sessions run on inference threads of their own and
 * the last on the main thread, between its reads (main-thread-instance.ts): N threads for N
 * sessions, as N replicas of one would take.
 *
 * A run goes to an idle instance, an inference thread's first; with none idle, into the queue of
 * the inference thread with the fewest runs (each holds a second run behind its first, see
 * ThreadedModel), so those threads have work while the main thread is in a run of its own.
 * Any instance's thread dying ends the actor as one thread's does.
 */
export class ModelInstances {
  readonly metadata: ModelMetadata;
  readonly provider: string;
  /** A lone call's run at the declared shape, measured on the first instance at load (ms). */
  readonly runMs: number;
  /** Batches that run at once: one per instance. */
  readonly runners: number;
  /** Runs held at once: on each inference thread a running one and one waiting behind it, one on the main thread. */
  readonly overlap: number;
  /** The inference threads' instances, then the main thread's. */
  readonly #instances: Instance[];

  private constructor(threaded: ThreadedModel[], main: MainThreadInstance | undefined) {
    const first = threaded[0]!;
    this.#instances = main ? [...threaded, main] : threaded;
    this.metadata = first.metadata;
    this.provider = first.provider;
    this.runMs = first.runMs;
    this.runners = this.#instances.length;
    this.overlap = this.#instances.reduce((sum, m) => sum + m.overlap, 0);
  }

  /**
   * Loads `count` sessions (at least 2), one after another (each warms up where it runs); a failure
   * releases those loaded. `mainThread: false` (TROUPE_INFERENCE_THREAD=always) keeps every one on
   * an inference thread, the main thread free for I/O. `loadedMain`, a session this thread already
   * loaded (to time it, actors/auto-layout.ts), becomes the main thread's instance.
   */
  static async load(
    path: string,
    options: LoadOptions,
    count: number,
    onDeath?: OnThreadDeath,
    mainThread = true,
    loadedMain?: OnnxModel,
  ): Promise<ModelInstances> {
    const instances: Instance[] = [];
    if (loadedMain && !mainThread) await loadedMain.release();
    try {
      // One at a time: loading is the phase most likely to run out of memory, and a second
      // session's warm-up would otherwise skew the first one's timed runs.
      const threaded: ThreadedModel[] = [];
      for (let i = 0; i < (mainThread ? count - 1 : count); i++) {
        threaded.push(await ThreadedModel.load(path, options, onDeath));
        instances.push(threaded.at(-1)!);
      }
      const main = mainThread ? new MainThreadInstance(loadedMain ?? (await OnnxModel.load(path, options))) : undefined;
      if (main) instances.push(main);
      return new ModelInstances(threaded, main);
    } catch (err) {
      await Promise.all(instances.map((m) => m.release()));
      if (loadedMain && mainThread && !instances.some((m) => m instanceof MainThreadInstance)) await loadedMain.release();
      throw err;
    }
  }

  /** Runs sent to each instance and not yet answered, in instance order. */
  get pendingRuns(): number[] {
    return this.#instances.map((m) => m.pendingRuns);
  }

  /** Whether an instance has no run: the batcher then starts the next batch at once, full or not. */
  idleRunner(): boolean {
    return this.#instances.some((m) => m.pendingRuns === 0);
  }

  run(inputs: Record<string, Tensor>, outputs?: readonly string[], notAfter?: number): Promise<Record<string, Tensor>> {
    const idle = this.#instances.find((m) => m.pendingRuns === 0);
    if (idle) return idle.run(inputs, outputs, notAfter);
    // None idle: the queue with the most room (only inference threads have a queue).
    let roomiest = this.#instances[0]!;
    for (const m of this.#instances) if (m.overlap - m.pendingRuns > roomiest.overlap - roomiest.pendingRuns) roomiest = m;
    return roomiest.run(inputs, outputs, notAfter);
  }

  runGoingOn(): Promise<unknown> | undefined {
    const going = this.#instances.flatMap((m) => m.runGoingOn() ?? []);
    return going.length > 0 ? Promise.all(going) : undefined;
  }

  async release(): Promise<void> {
    await Promise.all(this.#instances.map((m) => m.release()));
  }
}
