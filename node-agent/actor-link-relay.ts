import type { ActorToRelayIpc, AgentToHead, HeadToAgent, Logger, TroupeError } from '../runtime/internal.js';
import type { ActorProcess } from './actor-process.js';

/** The agent's connection to the head as the relay uses it: the current one, if any. */
interface HeadConnection {
  send(message: AgentToHead): void;
  request(message: { type: 'actorOpen'; actorId: string; secret: string }, timeoutMs?: number): Promise<unknown>;
}

/** How long the head may take to accept a relayed link before the actor is told to try again. */
const OPEN_TIMEOUT_MS = 10_000;

/**
 * Relays this node's actors' links to the head (`troupe agent --actor-links relay`): each actor
 * opens its link over IPC, the agent presents the actor's id and secret on its own connection
 * (`actorOpen`), and frames go both ways inside it. The head then holds one socket for the node
 * instead of one per actor. The agent reads no frame: it passes bytes. Losing the head ends every
 * link (each actor then reopens, with its usual backoff, once the agent is back).
 */
export class ActorLinkRelay {
  readonly #head: () => HeadConnection | undefined;
  readonly #log: Logger;
  /** Actors whose link is open now. */
  readonly #open = new Map<string, ActorProcess>();

  constructor(head: () => HeadConnection | undefined, log: Logger) {
    this.#head = head;
    this.#log = log;
  }

  fromActor(actor: ActorProcess, secret: string, message: ActorToRelayIpc): void {
    const { actorId } = actor;
    switch (message.type) {
      case 'headOpen': {
        this.#drop(actorId, 1001, 'the actor opened another link');
        const head = this.#head();
        if (!head) return actor.toActor({ type: 'headClosed', code: 1006, reason: 'the agent is not connected to the head' });
        head.request({ type: 'actorOpen', actorId, secret }, OPEN_TIMEOUT_MS).then(
          () => {
            this.#open.set(actorId, actor);
            actor.toActor({ type: 'headOpened' });
          },
          (err: TroupeError) => {
            if (err.code === 'TROUPE_ERR_UNAUTHORIZED') return actor.toActor({ type: 'headRefused', why: err.message.slice(0, 1024) });
            actor.toActor({ type: 'headClosed', code: 1006, reason: err.message.slice(0, 256) });
          },
        );
        return;
      }
      case 'headFrame':
        if (this.#open.has(actorId)) this.#head()?.send({ type: 'actorFrame', actorId, frame: message.frame });
        return;
      case 'headClose':
        if (this.#open.delete(actorId)) this.#head()?.send({ type: 'actorClose', actorId, code: message.code, reason: message.reason });
        return;
    }
  }

  fromHead(message: Extract<HeadToAgent, { type: 'actorFrame' | 'actorClose' }>): void {
    const actor = this.#open.get(message.actorId);
    if (!actor) return;
    if (message.type === 'actorFrame') return actor.toActor({ type: 'headFrame', frame: message.frame });
    this.#open.delete(message.actorId);
    actor.toActor({ type: 'headClosed', code: message.code, reason: message.reason });
  }

  /** The actor's process ended: its link ends with it. */
  actorGone(actorId: string): void {
    this.#drop(actorId, 1006, 'the actor exited');
  }

  /** The agent lost the head: every link it carried is gone. */
  headLost(): void {
    if (this.#open.size > 0) this.#log.debug({ links: this.#open.size }, 'relayed actor links closed with the head connection');
    for (const actor of this.#open.values()) actor.toActor({ type: 'headClosed', code: 1006, reason: 'the agent lost the head' });
    this.#open.clear();
  }

  #drop(actorId: string, code: number, reason: string): void {
    if (this.#open.delete(actorId)) this.#head()?.send({ type: 'actorClose', actorId, code, reason });
  }
}
