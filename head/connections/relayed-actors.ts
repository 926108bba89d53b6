import { RelayedTransport, TroupeError, sendRelayedFrame } from '../../runtime/internal.js';
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
 * with a connection of its own, while it holds one socket for the whole node. An actor numbers the
 * openings of its link; a message about another opening than the current one is dropped. An agent
 * may relay only its own node's actors; its connection's end ends every link it carried.
 */
export class RelayedActors {
  readonly #links = new Map<string, { link: number; transport: RelayedTransport }>();
  readonly #channel: AgentChannel;
  readonly #server: ActorLinkServer;

  constructor(channel: AgentChannel, server: ActorLinkServer) {
    this.#channel = channel;
    this.#server = server;
  }

  /**
   * Opens opening `link` of `actorId`'s link for the agent of `node`. Throws TROUPE_ERR_CONNECTION_CLOSED
   * (retryable) before the agent has registered, TROUPE_ERR_UNAUTHORIZED for credentials that open
   * nothing on this node.
   */
  open(node: NodeRecord | undefined, actorId: string, link: number, secret: string): void {
    if (!node)
      throw new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'this agent has not registered: relayed actor links open after it has');
    const actor = this.#server.join(actorId, secret);
    if (!actor || actor.nodeId !== node.id)
      throw new TroupeError('TROUPE_ERR_UNAUTHORIZED', `unknown actor or wrong actor secret for an actor of this node: '${actorId}'`);
    // A reopened link replaces the one before it, as a reconnecting actor's connection does.
    this.#links.get(actorId)?.transport.ended(1006, 'the actor opened another link');
    const transport = new RelayedTransport({
      send: (frame) => sendRelayedFrame(this.#channel, { type: 'actorFrame', actorId, link, frame }),
      close: (code, reason) => this.#channel.send({ type: 'actorClose', actorId, link, code, reason: reason.slice(0, 256) }),
      bufferedBytes: () => this.#channel.bufferedBytes,
    });
    const entry = { link, transport };
    this.#links.set(actorId, entry);
    const served = this.#server.serve(transport, actor);
    void served.whenClosed.then(() => {
      if (this.#links.get(actorId) === entry) this.#links.delete(actorId);
    });
  }

  frame(actorId: string, link: number, frame: Uint8Array): void {
    const entry = this.#links.get(actorId);
    if (entry?.link === link) entry.transport.deliver(frame);
  }

  closed(actorId: string, link: number, code: number, reason: string): void {
    const entry = this.#links.get(actorId);
    if (entry?.link !== link) return;
    this.#links.delete(actorId);
    entry.transport.ended(code, reason);
  }

  /** The agent's connection is gone: so is every link in it. */
  endAll(reason: string): void {
    for (const { transport } of this.#links.values()) transport.ended(1006, reason);
    this.#links.clear();
  }
}
