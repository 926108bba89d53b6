import type { ActorRecord, NodeRecord } from '../state/records.js';
import { RankedNodes } from './ranked-nodes.js';

/** What one request ranks: each ALIVE node's verdict, the nodes that still fit ordered best first. */
interface Ranking {
  request: string;
  ranked: RankedNodes<unknown>;
  nodes: Map<string, NodeRecord>;
  /** Nodes an actor landed on since their verdict was taken: ranked again before the next answer. */
  stale: Set<string>;
}

/**
 * The actors that hold resources on each node (STARTING, READY or DRAINING), grouped once so
 * that placing an actor reads each node's own actors instead of scanning the whole cluster's for
 * every node (at 1,000 nodes and 7,000 actors that scan was milliseconds per placement and
 * seconds per deploy: bench/scale/HISTORY.md). A scheduling pass builds one over a fixed set of
 * nodes and `add`s each actor it places, so later placements see it. What the scheduler made of
 * each node for one request (its usage, the GPUs it would give) is ranked once (see `best`) and
 * kept until an actor lands on that node or another request comes: a pass places one
 * deployment's replicas in a row, so each of those placements re-ranks one node, not all of them.
 */
export class ActorsByNode {
  readonly #byNode = new Map<string, ActorRecord[]>();
  static readonly #none: readonly ActorRecord[] = [];
  #ranking: Ranking | undefined;

  constructor(actors: Iterable<ActorRecord>) {
    for (const a of actors) this.add(a);
  }

  /** Counts `a` against its node, if it holds resources there. */
  add(a: ActorRecord): void {
    if (a.nodeId === null || a.state === 'DEAD' || a.state === 'PENDING') return;
    const list = this.#byNode.get(a.nodeId);
    if (list) list.push(a);
    else this.#byNode.set(a.nodeId, [a]);
    this.#ranking?.stale.add(a.nodeId);
  }

  on(nodeId: string): readonly ActorRecord[] {
    return this.#byNode.get(nodeId) ?? ActorsByNode.#none;
  }

  /**
   * The ALIVE node whose verdict comes first in `order`, or undefined when every verdict is null
   * (nothing fits). `evaluate` gives a node's verdict for `request` (a key naming everything the
   * verdict depends on besides the node's actors); each node's is taken once per request and
   * again only after an actor is added to it. `nodes` is read when the request changes: the
   * same nodes for as long as this index lives (one scheduling pass).
   */
  best<T>(
    request: string,
    nodes: Iterable<NodeRecord>,
    evaluate: (node: NodeRecord) => T | null,
    order: (a: T, b: T) => number,
  ): T | undefined {
    let r = this.#ranking;
    if (r?.request !== request) {
      r = { request, ranked: new RankedNodes<unknown>(order as (a: unknown, b: unknown) => number), nodes: new Map(), stale: new Set() };
      for (const node of nodes) {
        if (node.state !== 'ALIVE') continue;
        r.nodes.set(node.id, node);
        r.ranked.set(node.id, evaluate(node));
      }
      this.#ranking = r;
    }
    for (const id of r.stale) {
      const node = r.nodes.get(id);
      if (node) r.ranked.set(id, evaluate(node));
    }
    r.stale.clear();
    return r.ranked.top() as T | undefined;
  }
}
