import type { RunTrace } from '../graph/trace.js';
import type { Tensor } from '../tensor/tensor.js';

export type Outputs = Record<string, Tensor>;

/** Where a Future stands: not settled yet, settled with its value, or settled with an error. */
export type FutureStatus = 'pending' | 'fulfilled' | 'rejected';

/**
 * One output of a run, to pass as an input of another run without fetching it:
 * `cluster.run('rec', { x: det.output('boxes') })`.
 */
export class FutureOutput {
  constructor(
    /** The run whose output this is. */
    readonly run: string,
    readonly output: string,
    /** That run's future, when this client made it. */
    readonly source?: Future,
  ) {}
}

/**
 * The handle `run` returns at once. Await it for the outputs; it rejects with a TroupeError
 * whose `code` says what failed. Pass it (or {@link Future.output}) as an input of another `run`
 * and the head feeds the result across itself, without a round trip through this client.
 *
 * @example
 * const future = cluster.run('mlp', { x });
 * const voted = cluster.run('vote', { x: future });   // sent now, resolved on the head
 * const { logits } = await future;
 */
export class Future<T = Outputs> implements PromiseLike<T> {
  readonly id: string;
  /**
   * @internal The run went straight to a replica, so the head does not hold its result: a run
   * that takes this future gets its tensors from this client.
   */
  readonly resolvedHere: boolean;
  readonly #promise: Promise<T>;
  readonly #trace: Promise<RunTrace | undefined>;
  readonly #version: Promise<string | undefined>;
  #status: FutureStatus = 'pending';

  constructor(
    id: string,
    promise: Promise<T>,
    trace: Promise<RunTrace | undefined> = promise.then(() => undefined),
    resolvedHere = false,
    version: Promise<string | undefined> = promise.then(() => undefined),
  ) {
    this.id = id;
    this.resolvedHere = resolvedHere;
    this.#promise = promise;
    this.#trace = trace;
    this.#version = version;
    // Registered first, so that whoever awaits this future sees its status already settled. It
    // also keeps a future nobody awaits from becoming an unhandled rejection that kills the process.
    promise.then(
      () => (this.#status = 'fulfilled'),
      () => (this.#status = 'rejected'),
    );
    trace.catch(() => {});
    version.catch(() => {});
  }

  then<A = T, B = never>(
    onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#promise.then(onFulfilled, onRejected);
  }

  catch<B = never>(onRejected: (reason: unknown) => B | PromiseLike<B>): Promise<T | B> {
    return this.#promise.catch(onRejected);
  }

  /**
   * Where this future stands now, without waiting (Ray's `ray.wait(…, timeout=0)` for one ref):
   * 'pending' until its answer came, then 'fulfilled' or 'rejected'. See also {@link wait}.
   *
   * @example
   * const future = counter.call('add', 1);
   * future.status(); // 'pending'
   * await future;
   * future.status(); // 'fulfilled'
   */
  status(): FutureStatus {
    return this.#status;
  }

  /** A reference to one named output of this run, to pass as an input of another run. */
  output(name: string): FutureOutput {
    return new FutureOutput(this.id, name, this as Future);
  }

  /**
   * Which version answered a run of a deployment split between versions (docs/rollouts.md): the
   * one the split chose, or the one the run named (`run('ab.v2', ...)`); undefined for any other run.
   *
   * @example
   * const future = cluster.run('ab', { x });
   * const { logits } = await future;
   * console.log(await future.version()); // 'v1' or 'v2'
   */
  version(): Promise<string | undefined> {
    return this.#version;
  }

  /** The per-step timing trace of a run started with `{ trace: true }` (undefined otherwise). */
  trace(): Promise<RunTrace | undefined> {
    return this.#trace;
  }
}
