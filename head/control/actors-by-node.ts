import type { ActorRecord } from '../state/records.js';

/**
 * The actors that hold resources on each node (STARTING, READY or DRAINING), grouped once so
 * that placing an actor reads each node's own actors instead of scanning the whole cluster's for
 * every node: a placement costs O(actors + nodes), not O(actors × nodes), which at 1,000 nodes
 * and 7,000 actors was seconds per placement (bench/RESULTS-scale.md). A scheduling pass builds
 * one and `add`s each actor it places, so later placements in the pass see it.
 */
export class ActorsByNode {
  readonly #byNode = new Map<string, ActorRecord[]>();
  static readonly #none: readonly ActorRecord[] = [];

  constructor(actors: Iterable<ActorRecord>) {
    for (const a of actors) this.add(a);
  }

  /** Counts `a` against its node, if it holds resources there. */
  add(a: ActorRecord): void {
    if (a.nodeId === null || a.state === 'DEAD' || a.state === 'PENDING') return;
    const list = this.#byNode.get(a.nodeId);
    if (list) list.push(a);
    else this.#byNode.set(a.nodeId, [a]);
  }

  on(nodeId: string): readonly ActorRecord[] {
    return this.#byNode.get(nodeId) ?? ActorsByNode.#none;
  }
}
