import type { HeadToAgent } from '../../runtime/internal.js';
import { Limiter } from './limiter.js';
import { SimNode } from './sim-node.js';

type StartActor = Extract<HeadToAgent, { type: 'startActor' }>;

export interface FleetOptions {
  headUrl: string;
  nodes: number;
  gpusPerNode: number;
  heartbeatMs: number;
  /** See SimNodeOptions.actorStatsMs. */
  actorStatsMs?: number;
  /** How actors reach the head (see SimNodeOptions.actorLinks; default relay, as a large cluster's agents are run). */
  actorLinks?: 'direct' | 'relay';
  /** Connections (agents' and actors') being opened at once; see limiter.ts. */
  connectConcurrency?: number;
}

/** When the harness saw an actor's start order and when that actor said `ready`. */
export interface ActorTimes {
  node: string;
  orderedAt: number;
  readyAt?: number;
}

/**
 * N simulated nodes in this process, each with its own agent connection (and, with direct actor
 * links, one connection per actor), and the times of every start order and `ready` they saw (the latest per actor id).
 */
export class Fleet {
  readonly nodes: SimNode[] = [];
  readonly times = new Map<string, ActorTimes>();
  /** Start orders seen per actor id: one per placement (a restart or a replacement is one more). */
  readonly orders = new Map<string, number>();
  /** Called with every start order as it arrives, before the node starts the actor (checks of each placement). */
  onOrder: (order: StartActor, node: SimNode) => void = () => {};

  static async start(options: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet();
    const digits = String(options.nodes - 1).length;
    const connects = new Limiter(options.connectConcurrency ?? 64);
    for (let i = 0; i < options.nodes; i++) {
      fleet.nodes.push(
        new SimNode({
          headUrl: options.headUrl,
          name: `sim-${String(i).padStart(digits, '0')}`,
          gpus: options.gpusPerNode,
          cpus: Math.max(8, options.gpusPerNode * 8),
          memoryBytes: 2 ** 40,
          heartbeatMs: options.heartbeatMs,
          actorStatsMs: options.actorStatsMs,
          actorLinks: options.actorLinks ?? 'relay',
          connects,
          onStart: (order, node) => fleet.#started(order, node),
          onReady: (actorId) => fleet.#ready(actorId),
        }),
      );
    }
    await Promise.all(fleet.nodes.map((node) => node.start()));
    return fleet;
  }

  #started(order: StartActor, node: SimNode): void {
    this.orders.set(order.actorId, (this.orders.get(order.actorId) ?? 0) + 1);
    this.times.set(order.actorId, { node: node.name, orderedAt: performance.now() });
    this.onOrder(order, node);
  }

  #ready(actorId: string): void {
    const t = this.times.get(actorId);
    if (t) t.readyAt = performance.now();
  }

  /** Drops every connection (after the head has gone, or to end a run at once). */
  close(): void {
    for (const node of this.nodes) if (!node.dead) node.kill();
  }
}
