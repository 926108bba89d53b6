import type { Logger } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import { returnToPending } from '../state/record-changes.js';
import type { ActorRecord, NodeRecord } from '../state/records.js';
import { adoptListed } from './adoption.js';
import type { AgentLink } from './agent-link.js';
import type { Clock } from './clock.js';
import type { RunningActorReport } from './controller-options.js';
import { applyHeartbeat, registerNode } from './nodes.js';
import type { AgentRegistration, Heartbeat } from './nodes.js';

/** What a change of membership does to actors: the controller's own lifecycle rules. */
export interface ActorEffects {
  /** The actor's process is gone: restart it with back-off, or give up (restart-policy.ts). */
  crashed(a: ActorRecord, cause: string): void;
  /** The actor will not be adopted: placed anew as a fresh process. */
  replace(a: ActorRecord, why: string): void;
  /** Places what is PENDING. */
  schedule(): void;
  /** Records or routes changed (state file, route pushes). */
  dirty(): void;
}

/**
 * The controller's half that follows nodes: agents registering and leaving, heartbeats, liveness
 * verdicts (SUSPECT, DEAD) and what they mean for the actors on a node. Part of the controller
 * (`controller.nodes`): every node state change goes through here, and its consequences for
 * actors through the controller's {@link ActorEffects}.
 */
export class NodeMembership {
  readonly #state: ClusterState;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #actors: ActorEffects;

  constructor(state: ClusterState, log: Logger, clock: Clock, actors: ActorEffects) {
    this.#state = state;
    this.#log = log;
    this.#clock = clock;
    this.#actors = actors;
  }

  /**
   * A node agent registered on `agent`: its node is ALIVE with what it offers, the actors it lists
   * are kept, adopted or stopped (see nodeRegistered). Throws TROUPE_ERR_NODE_NAME_TAKEN while a
   * live node holds the name. The caller answers the agent, then calls schedule().
   */
  agentRegistered(registration: AgentRegistration, running: readonly RunningActorReport[], agent: AgentLink): NodeRecord {
    const node = registerNode(this.#state, registration, agent, this.#clock.now());
    for (const actorId of this.nodeRegistered(node, running)) {
      this.#log.info({ node: node.name, actor: actorId }, 'stopping an actor the head does not want on this node');
      void agent.stopActor(actorId, 5000);
    }
    this.#log.info({ node: node.name, cpus: node.resources.cpus, gpus: node.resources.gpus.length }, 'node joined');
    this.#state.events.add('node-joined', `${node.name} joined (${node.resources.cpus} CPUs, ${node.resources.gpus.length} GPUs)`);
    return node;
  }

  /** A node's heartbeat: it is heard from now; a SUSPECT node is ALIVE again and may take actors. */
  nodeHeartbeat(node: NodeRecord, heartbeat: Heartbeat): void {
    // Actors left PENDING while this node was SUSPECT may fit here again.
    if (applyHeartbeat(this.#state, node, heartbeat, this.#clock.now())) this.#actors.schedule();
  }

  /**
   * A node agent's connection closed. An agent `leaving` on purpose takes its node out at once;
   * otherwise liveness decides when the silent node is DEAD, and a closed socket only makes it
   * SUSPECT now. A connection already replaced by a newer one changes nothing.
   */
  agentDisconnected(node: NodeRecord, agent: AgentLink, leaving: boolean): void {
    if (node.agent !== agent) return;
    node.agent = undefined;
    if (leaving) {
      node.state = 'DEAD';
      this.#log.info({ node: node.name }, 'node left');
      this.#state.events.add('node-left', `${node.name} left the cluster`);
      this.nodeLost(node, 'left');
      return;
    }
    if (node.state === 'ALIVE') node.state = 'SUSPECT';
    this.#log.warn({ node: node.name }, 'node connection closed');
  }

  /** Liveness: an ALIVE node silent for `silentMs` is SUSPECT, and takes no new actors. */
  nodeSuspect(node: NodeRecord, silentMs: number): void {
    if (node.state !== 'ALIVE') return;
    node.state = 'SUSPECT';
    this.#log.warn({ node: node.name, silentMs }, 'node is SUSPECT');
    this.#state.events.add('node-suspect', `${node.name} SUSPECT after ${silentMs} ms without a heartbeat`);
  }

  /** Liveness: a node silent for `silentMs` is DEAD; its connection is dropped and its actors restart elsewhere. */
  nodeDead(node: NodeRecord, silentMs: number): void {
    if (node.state === 'DEAD') return;
    node.state = 'DEAD';
    node.agent?.close();
    node.agent = undefined;
    this.#log.warn({ node: node.name, silentMs }, 'node is DEAD');
    this.#state.events.add('node-lost', `${node.name} DEAD after ${silentMs} ms without a heartbeat`);
    this.nodeLost(node, 'lost');
  }

  /** The head itself did not run for `ms` (a stall): that time counts as no node's silence. */
  headStalled(ms: number): void {
    const now = this.#clock.now();
    for (const node of this.#state.nodes.values()) node.lastSeen = Math.min(now, node.lastSeen + ms);
  }

  /**
   * A node agent (re)registered, listing the actors it still runs: those this head knows there are
   * kept or adopted, the others returned to be stopped (adoption.ts). Actors the head thinks run
   * there that the agent does not list died while it was away.
   */
  nodeRegistered(node: NodeRecord, running: readonly RunningActorReport[]): string[] {
    const { listed, stop } = adoptListed(this.#state, node, running, this.#log);
    for (const a of [...this.#state.actors.values()]) {
      if (listed.has(a.id)) continue;
      if (a.nodeId === node.id && (a.state === 'STARTING' || a.state === 'READY')) {
        this.#actors.crashed(a, `its process was gone when node ${node.name} reconnected`);
      } else if (a.nodeId === null && a.awaitingNode === node.name && a.state === 'STARTING') {
        this.#actors.replace(a, `node ${node.name} reconnected without it`);
      } else if (a.nodeId === node.id && a.state === 'DRAINING') {
        // Its stop order may have been lost with the old connection; it is gone or it is stopped now.
        if (!running.some((r) => r.actorId === a.id)) this.#state.actors.delete(a.id);
      }
    }
    this.#actors.dirty();
    return stop;
  }

  /**
   * A node is gone: its actors are placed elsewhere. A node that `left` on purpose costs its actors
   * no restart budget; a `lost` one counts as a crash of each.
   */
  nodeLost(node: NodeRecord, how: 'left' | 'lost'): void {
    this.#actors.dirty();
    for (const a of this.#state.actors.values()) {
      if (a.nodeId !== node.id) continue;
      // A lost node's actors may be unreachable: drop their sockets now, so the calls they hold
      // fail as ACTOR_DIED at once and are retried on other replicas, instead of waiting for a TCP
      // timeout. A node that leaves on purpose drains its actors (SIGTERM: they finish what they
      // hold and close their sockets themselves), so their links are only let go.
      if (how === 'lost') a.link?.terminate(`node ${node.name} was lost`);
      a.link = undefined;
      a.pid = null;
      if (a.state === 'DRAINING') this.#state.actors.delete(a.id);
      else if (a.state === 'DEAD') continue;
      else if (how === 'lost') this.#actors.crashed(a, `node ${node.name} was lost`);
      else returnToPending(a, `node ${node.name} left`);
    }
    this.#actors.schedule();
  }
}
