import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import type { LoadOptions } from './onnx-model.js';
import { ThreadedModel } from './threaded-model.js';
import type { OnThreadDeath } from './threaded-model.js';

/**
 * Several instances of one model in one actor (Triton's instance_group count): each a session on
 * an inference thread of its own, so the replica runs that many batches at once. On a CPU, N
 * sessions of one intra-op thread each keep N cores busy with no barrier between them, where one
 * session of N threads meets at a barrier after every parallel section and waits there for any
 * thread the actor's I/O or another process delayed (docs/performance.md#model-instances).
 *
 * A run goes to the instance with the fewest runs sent to it, so an idle instance takes the next
 * batch at once; each instance may hold a second run waiting behind its first (see ThreadedModel).
 * Any instance's thread dying ends the actor as one thread's does.
 */
export class ModelInstances {
  readonly metadata: ModelMetadata;
  readonly provider: string;
  /** A lone call's run at the declared shape, measured on the first instance at load (ms). */
  readonly runMs: number;
  /** Batches that run at once: one per instance. */
  readonly runners: number;
  /** Runs held at once: a running one and one waiting behind it on each instance. */
  readonly overlap: number;
  readonly #instances: ThreadedModel[];

  private constructor(instances: ThreadedModel[]) {
    const first = instances[0]!;
    this.#instances = instances;
    this.metadata = first.metadata;
    this.provider = first.provider;
    this.runMs = first.runMs;
    this.runners = instances.length;
    this.overlap = instances.length * first.overlap;
  }

  /** Loads `count` sessions, one after another (each warms up on its thread); a failure releases those loaded. */
  static async load(path: string, options: LoadOptions, count: number, onDeath?: OnThreadDeath): Promise<ModelInstances> {
    const instances: ThreadedModel[] = [];
    try {
      // One at a time: loading is the phase most likely to run out of memory, and a second
      // session's warm-up would otherwise skew the first one's timed runs.
      for (let i = 0; i < count; i++) instances.push(await ThreadedModel.load(path, options, onDeath));
    } catch (err) {
      await Promise.all(instances.map((m) => m.release()));
      throw err;
    }
    return new ModelInstances(instances);
  }

  /** Runs sent to each instance and not yet answered, in instance order. */
  get pendingRuns(): number[] {
    return this.#instances.map((m) => m.pendingRuns);
  }

  run(inputs: Record<string, Tensor>, outputs?: readonly string[], notAfter?: number): Promise<Record<string, Tensor>> {
    let least = this.#instances[0]!;
    for (const m of this.#instances) if (m.pendingRuns < least.pendingRuns) least = m;
    return least.run(inputs, outputs, notAfter);
  }

  runGoingOn(): Promise<unknown> | undefined {
    const going = this.#instances.flatMap((m) => m.runGoingOn() ?? []);
    return going.length > 0 ? Promise.all(going) : undefined;
  }

  async release(): Promise<void> {
    await Promise.all(this.#instances.map((m) => m.release()));
  }
}
