import type { ActorRecord } from '../state/records.js';
import { usageOn } from './usage.js';
import type { NodeUsage } from './usage.js';

/**
 * The actors that hold resources on each node (STARTING, READY or DRAINING), grouped once so
 * that placing an actor reads each node's own actors instead of scanning the whole cluster's for
 * every node: a placement costs O(nodes), not O(actors × nodes), which at 1,000 nodes and 7,000
 * actors was milliseconds per placement and seconds per deploy (bench/RESULTS-scale.md). A
 * scheduling pass builds one and `add`s each actor it places, so later placements see it. Each
 * node's usage is kept for the deployment being placed until an actor is added to that node:
 * a pass places one deployment's replicas in a row, so most nodes' usage is computed once.
 */
export class ActorsByNode {
  readonly #byNode = new Map<string, ActorRecord[]>();
  static readonly #none: readonly ActorRecord[] = [];
  readonly #usage = new Map<string, NodeUsage>();
  #usageFor: string | undefined;

  constructor(actors: Iterable<ActorRecord>) {
    for (const a of actors) this.add(a);
  }

  /** Counts `a` against its node, if it holds resources there. */
  add(a: ActorRecord): void {
    if (a.nodeId === null || a.state === 'DEAD' || a.state === 'PENDING') return;
    const list = this.#byNode.get(a.nodeId);
    if (list) list.push(a);
    else this.#byNode.set(a.nodeId, [a]);
    this.#usage.delete(a.nodeId);
  }

  on(nodeId: string): readonly ActorRecord[] {
    return this.#byNode.get(nodeId) ?? ActorsByNode.#none;
  }

  /** What the node's actors use, and how many replicas of `deployment` it holds. */
  usage(nodeId: string, deployment: string): NodeUsage {
    if (this.#usageFor !== deployment) {
      this.#usage.clear();
      this.#usageFor = deployment;
    }
    let usage = this.#usage.get(nodeId);
    if (!usage) this.#usage.set(nodeId, (usage = usageOn(nodeId, this.on(nodeId), deployment)));
    return usage;
  }
}
