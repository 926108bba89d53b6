import type { ActorRecord } from '../state/records.js';

/**
 * The actors that hold resources on each node (STARTING, READY or DRAINING), grouped once so
 * that placing an actor reads each node's own actors instead of scanning the whole cluster's for
 * every node (at 1,000 nodes and 7,000 actors that scan was milliseconds per placement and
 * seconds per deploy: bench/RESULTS-scale.md). A scheduling pass builds one and `add`s each actor
 * it places, so later placements see it. What the scheduler made of a node for one request (its
 * usage, the GPUs it would give) is kept until an actor lands on that node or another request
 * comes: a pass places one deployment's replicas in a row, so each of those placements
 * re-examines one node, not all of them.
 */
export class ActorsByNode {
  readonly #byNode = new Map<string, ActorRecord[]>();
  static readonly #none: readonly ActorRecord[] = [];
  readonly #kept = new Map<string, unknown>();
  #keptFor: string | undefined;

  constructor(actors: Iterable<ActorRecord>) {
    for (const a of actors) this.add(a);
  }

  /** Counts `a` against its node, if it holds resources there. */
  add(a: ActorRecord): void {
    if (a.nodeId === null || a.state === 'DEAD' || a.state === 'PENDING') return;
    const list = this.#byNode.get(a.nodeId);
    if (list) list.push(a);
    else this.#byNode.set(a.nodeId, [a]);
    this.#kept.delete(a.nodeId);
  }

  on(nodeId: string): readonly ActorRecord[] {
    return this.#byNode.get(nodeId) ?? ActorsByNode.#none;
  }

  /**
   * `evaluate`'s answer for the node, computed once per `request` (a key naming everything the
   * answer depends on besides the node's actors) until an actor is added to the node.
   */
  kept<T>(nodeId: string, request: string, evaluate: () => T): T {
    if (this.#keptFor !== request) {
      this.#kept.clear();
      this.#keptFor = request;
    }
    if (this.#kept.has(nodeId)) return this.#kept.get(nodeId) as T;
    const value = evaluate();
    this.#kept.set(nodeId, value);
    return value;
  }
}
