import { MAX_RELAYED_FRAME_BYTES, sendRelayedFrame } from '../runtime/internal.js';
import type { ActorToRelayIpc, AgentToHead, HeadToAgent, Logger, TroupeError } from '../runtime/internal.js';
import type { ActorProcess } from './actor-process.js';

/** The agent's registered connection to the head, as the relay uses it. */
export interface HeadConnection {
  send(message: AgentToHead): void;
  /** Sends in an agent frame of its own (a large relayed frame). */
  sendAlone(message: AgentToHead): void;
  request(message: { type: 'actorOpen'; actorId: string; link: number; secret: string }, timeoutMs?: number): Promise<unknown>;
}

/** How long the head may take to accept a relayed link before the actor is told to try again. */
const OPEN_TIMEOUT_MS = 10_000;

interface Link {
  actor: ActorProcess;
  /** The actor's number for this opening of its link. */
  seq: number;
  /** The connection it was opened on: a link does not outlive it. */
  head: HeadConnection;
}

/**
 * Relays this node's actors' links to the head (`troupe agent --actor-links relay`): each actor
 * opens its link over IPC, the agent presents the actor's id and secret on its own registered
 * connection (`actorOpen`), and frames go both ways inside it. The head then holds one socket for
 * the node instead of one per actor. The agent reads no frame: it passes bytes. Each opening is
 * numbered by the actor and named in every message about it, so a late answer or frame of an
 * older opening is dropped at each end. Losing the head ends every link (each actor then reopens,
 * with its usual backoff, once the agent is back).
 */
export class ActorLinkRelay {
  readonly #head: () => HeadConnection | undefined;
  readonly #log: Logger;
  /** Links open now, and openings waiting for the head's answer, by actor id. */
  readonly #open = new Map<string, Link>();
  readonly #opening = new Map<string, Link>();

  constructor(head: () => HeadConnection | undefined, log: Logger) {
    this.#head = head;
    this.#log = log;
  }

  fromActor(actor: ActorProcess, secret: string, message: ActorToRelayIpc): void {
    const { actorId } = actor;
    switch (message.type) {
      case 'headOpen':
        return this.#openFor(actor, secret, message.seq);
      case 'headFrame': {
        const link = this.#open.get(actorId);
        if (link?.seq !== message.seq) return;
        if (message.frame.byteLength > MAX_RELAYED_FRAME_BYTES) {
          // Too large for the agent's connection: only this link closes, as the actor's own connection would.
          this.#log.warn({ actor: actorId, bytes: message.frame.byteLength }, 'closed a relayed actor link: a frame over the limit');
          this.#drop(actorId, 1009, 'a frame over the limit');
          return actor.toActor({ type: 'headClosed', seq: message.seq, code: 1009, reason: 'a frame over the limit' });
        }
        return sendRelayedFrame(link.head, { type: 'actorFrame', actorId, link: message.seq, frame: message.frame });
      }
      case 'headClose':
        if (this.#open.get(actorId)?.seq === message.seq) this.#drop(actorId, message.code, message.reason);
        return;
    }
  }

  fromHead(message: Extract<HeadToAgent, { type: 'actorFrame' | 'actorClose' }>): void {
    const link = this.#open.get(message.actorId);
    if (link?.seq !== message.link) return;
    if (message.type === 'actorFrame') return link.actor.toActor({ type: 'headFrame', seq: link.seq, frame: message.frame });
    this.#open.delete(message.actorId);
    link.actor.toActor({ type: 'headClosed', seq: link.seq, code: message.code, reason: message.reason });
  }

  /** The actor's process ended: its link ends with it, and an opening of it is given up. */
  actorGone(actorId: string): void {
    this.#opening.delete(actorId);
    this.#drop(actorId, 1006, 'the actor exited');
  }

  /** The agent lost the head: every link it carried is gone, and every opening with it. */
  headLost(): void {
    if (this.#open.size > 0) this.#log.debug({ links: this.#open.size }, 'relayed actor links closed with the head connection');
    for (const link of [...this.#open.values(), ...this.#opening.values()])
      link.actor.toActor({ type: 'headClosed', seq: link.seq, code: 1006, reason: 'the agent lost the head' });
    this.#open.clear();
    this.#opening.clear();
  }

  #openFor(actor: ActorProcess, secret: string, seq: number): void {
    const { actorId } = actor;
    this.#drop(actorId, 1001, 'the actor opened another link');
    const head = this.#head();
    if (!head) return actor.toActor({ type: 'headClosed', seq, code: 1006, reason: 'the agent is not connected to the head' });
    const opening: Link = { actor, seq, head };
    this.#opening.set(actorId, opening);
    head.request({ type: 'actorOpen', actorId, link: seq, secret }, OPEN_TIMEOUT_MS).then(
      () => {
        // Given up meanwhile (the actor exited or opened again, or this connection went): the head lets go of it too.
        if (this.#opening.get(actorId) !== opening || !actor.running || this.#head() !== head) {
          head.send({ type: 'actorClose', actorId, link: seq, code: 1001, reason: 'no longer wanted' });
          return;
        }
        this.#opening.delete(actorId);
        this.#open.set(actorId, opening);
        actor.toActor({ type: 'headOpened', seq });
      },
      (err: TroupeError) => {
        if (this.#opening.get(actorId) !== opening) return;
        this.#opening.delete(actorId);
        if (err.code === 'TROUPE_ERR_UNAUTHORIZED') return actor.toActor({ type: 'headRefused', seq, why: err.message.slice(0, 1024) });
        actor.toActor({ type: 'headClosed', seq, code: 1006, reason: err.message.slice(0, 256) });
      },
    );
  }

  #drop(actorId: string, code: number, reason: string): void {
    const link = this.#open.get(actorId);
    if (!link) return;
    this.#open.delete(actorId);
    link.head.send({ type: 'actorClose', actorId, link: link.seq, code, reason: reason.slice(0, 256) });
  }
}
