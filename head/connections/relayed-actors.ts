import { RelayedTransport, TroupeError } from '../../runtime/internal.js';
import type { FrameTransport } from '../../runtime/internal.js';
import type { AgentChannel } from '../control/agent-link.js';
import type { ActorRecord, NodeRecord } from '../state/records.js';

/** What the head does with an actor link an agent relays: the same as with an actor's own connection. */
export interface ActorLinkServer {
  /** The actor these credentials open, or undefined (unknown id, wrong secret, or an actor that is gone). */
  join(actorId: string, secret: string): ActorRecord | undefined;
  /** Serves the link as /v1/actor serves a connection; returns its channel. */
  serve(transport: FrameTransport, actor: ActorRecord): { whenClosed: Promise<unknown> };
}

/**
 * The actor links one agent's connection carries (`troupe agent --actor-links relay`): each is a
 * RelayedTransport under the channel serveActor builds, so the head treats a relayed actor as one
 * with a connection of its own, while it holds one socket for the whole node. An agent may relay
 * only its own node's actors; its connection's end ends every link it carried.
 */
export class RelayedActors {
  readonly #links = new Map<string, RelayedTransport>();
  readonly #channel: AgentChannel;
  readonly #server: ActorLinkServer;

  constructor(channel: AgentChannel, server: ActorLinkServer) {
    this.#channel = channel;
    this.#server = server;
  }

  /** Opens a link for `actorId` of `node` (throws TROUPE_ERR_UNAUTHORIZED for credentials that open nothing here). */
  open(node: NodeRecord | undefined, actorId: string, secret: string): void {
    const actor = this.#server.join(actorId, secret);
    if (!actor || !node || actor.nodeId !== node.id)
      throw new TroupeError('TROUPE_ERR_UNAUTHORIZED', `unknown actor or wrong actor secret for an actor of this node: '${actorId}'`);
    // A reopened link replaces the one before it, as a reconnecting actor's connection does.
    this.#links.get(actorId)?.ended(1006, 'the actor opened another link');
    const transport = new RelayedTransport({
      send: (frame) => this.#channel.send({ type: 'actorFrame', actorId, frame }),
      close: (code, reason) => this.#channel.send({ type: 'actorClose', actorId, code, reason: reason.slice(0, 256) }),
      bufferedBytes: () => this.#channel.bufferedBytes,
    });
    this.#links.set(actorId, transport);
    const served = this.#server.serve(transport, actor);
    void served.whenClosed.then(() => {
      if (this.#links.get(actorId) === transport) this.#links.delete(actorId);
    });
  }

  frame(actorId: string, frame: Uint8Array): void {
    this.#links.get(actorId)?.deliver(frame);
  }

  closed(actorId: string, code: number, reason: string): void {
    const link = this.#links.get(actorId);
    this.#links.delete(actorId);
    link?.ended(code, reason);
  }

  /** The agent's connection is gone: so is every link in it. */
  endAll(reason: string): void {
    for (const link of this.#links.values()) link.ended(1006, reason);
    this.#links.clear();
  }

  get size(): number {
    return this.#links.size;
  }
}
