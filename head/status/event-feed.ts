import type { ClusterState } from '../state/cluster-state.js';
import type { StatusEvent } from './client/protocol.js';

/** Events the page can ask for on connecting; the head's log keeps more. */
const KEPT = 500;

/**
 * The cluster's events as the status page sees them: numbered, so a page that reconnects or gets
 * an event both in its first update and in the next one keeps one copy; and, per actor, the
 * newest crash or failure, which the actors table shows as "last error" after the actor has
 * recovered and its state no longer says why it restarted.
 */
export class EventFeed {
  readonly #events: StatusEvent[] = [];
  readonly #lastErrors = new Map<string, { time: number; message: string }>();
  readonly #stop: () => void;
  #seq = 0;

  constructor(state: ClusterState, onEvent: () => void) {
    for (const e of state.events.recent(KEPT)) this.#events.push({ seq: ++this.#seq, ...e });
    this.#stop = state.events.subscribe((e) => {
      this.#events.push({ seq: ++this.#seq, time: e.time, kind: e.kind, message: e.message });
      if (this.#events.length > KEPT) this.#events.splice(0, this.#events.length - KEPT);
      if (e.kind === 'actor-crashed' || e.kind === 'actor-dead') {
        // Every actor event starts with the actor's name (`<deployment>#<replica>`, no spaces); the
        // actor it means has just turned RESTARTING or DEAD, and its reason, set just before the
        // event, carries the whole cause (stderr lines too). A name can outlive one record (a
        // replacement replica), so the error is kept by actor id.
        const name = e.message.split(' ', 1)[0]!;
        const actor = [...state.actors.values()].filter((a) => a.name === name && (a.state === 'RESTARTING' || a.state === 'DEAD')).at(-1);
        if (actor) this.#lastErrors.set(actor.id, { time: e.time, message: actor.reason ?? e.message });
      }
      onEvent();
    });
  }

  get seq(): number {
    return this.#seq;
  }

  /** Events numbered above `after`, oldest first. */
  since(after: number): StatusEvent[] {
    const i = this.#events.findIndex((e) => e.seq > after);
    return i < 0 ? [] : this.#events.slice(i);
  }

  lastError(actorId: string): { time: number; message: string } | null {
    return this.#lastErrors.get(actorId) ?? null;
  }

  /** Forgets actors that are gone (an undeployed deployment's replicas). */
  prune(ids: Set<string>): void {
    for (const id of this.#lastErrors.keys()) if (!ids.has(id)) this.#lastErrors.delete(id);
  }

  close(): void {
    this.#stop();
  }
}
