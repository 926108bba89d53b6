import type { Tensor } from '../tensor/tensor.js';

export type Outputs = Record<string, Tensor>;

/**
 * The handle `run` returns at once. Await it for the outputs; it rejects with a TroupeError
 * whose `code` says what failed.
 *
 * @example
 * const future = cluster.run('mlp', { x });
 * const { logits } = await future;
 */
export class Future<T = Outputs> implements PromiseLike<T> {
  readonly id: string;
  readonly #promise: Promise<T>;

  constructor(id: string, promise: Promise<T>) {
    this.id = id;
    this.#promise = promise;
    // A future nobody awaits must not become an unhandled rejection that kills the process.
    promise.catch(() => {});
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
}
