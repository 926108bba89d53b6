import type { ActorContext } from 'troupe';

/**
 * A long method that can be cancelled (docs/actors.md, "Cancelling calls"): `run` works in steps
 * and checks its call's signal between them, so `future.cancel()`, an aborted signal in the call
 * options, or a closed HTTP request stops it after the step under way. `troupe up` offers it as
 * module `actors/steps.js`.
 */
export class Steps {
  /** The call's context, set by the runtime (`declare`: the class adds no field of its own). */
  declare readonly context: ActorContext;
  #finished = 0;

  /** `steps` steps of `ms` each (a stand-in for a crawl, a batch, a long generation); answers how many ran. */
  async run(steps: number, ms = 10): Promise<number> {
    const { signal } = this.context;
    for (let i = 0; i < steps; i++) {
      signal.throwIfAborted(); // the caller cancelled: stop between two steps, state consistent
      await new Promise((resolve) => setTimeout(resolve, ms));
      this.#finished++;
    }
    return steps;
  }

  /** Steps finished over all calls, cancelled ones included: what they did before they stopped stays. */
  finished(): number {
    return this.#finished;
  }
}
