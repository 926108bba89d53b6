import type { ActorHandle } from 'troupe';

/**
 * Calls other actors through handles it is given as arguments (docs/actors.md, "Handles as
 * values"): each arrives as a handle on this instance's own client. `troupe up` offers it as
 * module `actors/router.js`.
 */
export class Router {
  /** Calls `add(n)` on the actor `target` names: a counter, say. */
  async addVia(target: ActorHandle, n: number): Promise<unknown> {
    return target.call('add', n);
  }
}
