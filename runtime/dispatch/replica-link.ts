import { TroupeError } from '../errors.js';
import type { CallReply, CallReplySchema, HeadToActor } from '../protocol/actor.js';
import type { Channel, OmitId } from '../transport/channel.js';

/** What a call carries as inputs on a channel that sends `Out`: wire tensors, or on a direct stream also shared-memory references. */
type CallInputs<Out> = Out extends { type: 'call'; inputs: infer I } ? I : never;
/** A channel that sends calls to an actor, whose replies are CallReplySchema's. */
export type CallChannel<In extends { type: string }, Out extends { type: string }> = Channel<In, Out, { call: typeof CallReplySchema }>;

/**
 * The caller's end of one socket to an actor: the head's link to each actor it runs calls on, and
 * an SDK client's direct link to a replica. It counts the calls it has in flight (what the
 * queues balance on) and turns a lost connection into TROUPE_ERR_ACTOR_DIED, which they retry.
 */
export class ReplicaLink<In extends { type: string } = { type: string }, Out extends { type: string } = HeadToActor> {
  readonly #channel: CallChannel<In, Out>;
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];
  #terminatedBecause: string | undefined;

  constructor(channel: CallChannel<In, Out>) {
    this.#channel = channel;
  }

  /** Calls sent to the actor and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  get closed(): boolean {
    return this.#channel.closed;
  }

  /** Sends one call; `timeoutMs` lets the actor drop it unrun if it waits past the deadline. */
  async call(inputs: CallInputs<Out>, outputs?: string[], timeoutMs?: number, model?: string): Promise<CallReply> {
    this.#inFlight++;
    try {
      const call = {
        type: 'call',
        inputs,
        ...(outputs ? { outputs } : {}),
        ...(timeoutMs !== undefined ? { timeoutMs: Math.max(1, timeoutMs) } : {}),
        ...(model !== undefined ? { model } : {}),
      };
      // `Out` is either end's message union (head -> actor, client -> replica): both have this
      // call, whose inputs are CallInputs<Out>, but the compiler cannot see that through the generic.
      return await this.#channel.request(call as unknown as OmitId<Out> & { type: 'call' });
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'TROUPE_ERR_CONNECTION_CLOSED') {
        const why = this.#terminatedBecause
          ? `the head dropped the actor's connection (${this.#terminatedBecause})`
          : 'the actor exited or lost its connection';
        throw new TroupeError('TROUPE_ERR_ACTOR_DIED', `${why} before answering`);
      }
      throw err;
    } finally {
      if (--this.#inFlight === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve();
    }
  }

  /** Resolves when no call is in flight (at once if none is), or after `timeoutMs`. */
  whenIdle(timeoutMs: number): Promise<void> {
    if (this.#inFlight === 0 || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#idleWaiters.push(() => (clearTimeout(timer), resolve()));
    });
  }

  close(reason: string): void {
    this.#channel.close(1000, reason);
  }

  /**
   * Drops the socket without a close handshake, for an actor whose node is unreachable (the
   * handshake could not finish, and calls in flight would wait out the close timeout before
   * failing over to another replica) or whose process opened a newer connection. Calls in flight
   * fail as ACTOR_DIED right away and are retried; `reason` goes into their message.
   */
  terminate(reason?: string): void {
    this.#terminatedBecause ??= reason;
    this.#channel.terminate();
  }
}
