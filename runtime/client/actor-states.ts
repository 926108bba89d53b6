import { TroupeError } from '../errors.js';
import { MAX_SEEN_INSTANCES } from '../protocol/method-call.js';

/**
 * What one client saw each class actor's instances answer from: per actor, instance name -> the
 * `stateId` of its last answer. Sent with every call and stream (`seen`), so an instance whose
 * state began anew since (it restarted with no checkpoint to restore) fails the call with
 * TROUPE_ERR_STATE_LOST instead of answering from a fresh state as if nothing happened.
 */
export class ActorStates {
  readonly #byActor = new Map<string, Map<string, string>>();

  /** `message` with what this client saw of its actor's instances, if anything. */
  withSeen<M extends { actor: string; seen?: Record<string, string> }>(message: M): M {
    const seen = this.#byActor.get(message.actor);
    return seen === undefined || seen.size === 0 ? message : { ...message, seen: Object.fromEntries(seen) };
  }

  /** Keeps what `reply` says it was served from; told once that a state is gone, forgets what it saw. */
  remember<R extends object>(actor: string, reply: Promise<R>): Promise<R> {
    reply.then(
      (r) => {
        const { instance, stateId } = r as { instance?: unknown; stateId?: unknown };
        if (typeof instance !== 'string' || typeof stateId !== 'string') return;
        let seen = this.#byActor.get(actor);
        if (!seen) this.#byActor.set(actor, (seen = new Map()));
        if (!seen.has(instance) && seen.size >= MAX_SEEN_INSTANCES) seen.delete(seen.keys().next().value!);
        seen.set(instance, stateId);
      },
      // The next call runs on the instance as it is now.
      (err: unknown) => {
        if (err instanceof TroupeError && err.code === 'TROUPE_ERR_STATE_LOST') this.#byActor.delete(actor);
      },
    );
    return reply;
  }

  /** This client removed `actor`: one deployed under its name later is no loss of state to it. */
  forget(actor: string): void {
    this.#byActor.delete(actor);
  }
}
