import { TroupeError } from '../errors.js';
import type { CallReply, CallReplySchema, HeadToActor, TenantReply, TenantReplySchema } from '../protocol/actor.js';
import type { Channel, OmitId } from '../transport/channel.js';
import type { InvokeReply, InvokeReplySchema, StreamItem } from '../protocol/class-actor.js';
import { newId } from '../ids.js';

/** Where a method call comes from, for the instance's context: the chain of instances waiting on it, and the time left. */
export interface InvokeOrigin {
  via?: string[] | undefined;
  timeoutMs?: number | undefined;
  /** The concurrency group of each instance's waiting call in `via`, the last being this call's. */
  viaGroups?: string[] | undefined;
  /** The concurrency group the call runs in; absent: its method's. */
  group?: string | undefined;
}

/** A streaming call in flight on a link (see ReplicaLink.invokeStream). */
export interface LinkStream {
  done: Promise<InvokeReply>;
  credit(n: number): void;
  cancel(): void;
}

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
  readonly #streams = new Map<string, (seq: number, value: unknown) => void>();
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
  call(inputs: CallInputs<Out>, outputs?: string[], timeoutMs?: number, model?: string): Promise<CallReply> {
    const call = {
      type: 'call',
      inputs,
      ...(outputs ? { outputs } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs: Math.max(1, timeoutMs) } : {}),
      ...(model !== undefined ? { model } : {}),
    };
    // `Out` is either end's message union (head -> actor, client -> replica): both have this
    // call, whose inputs are CallInputs<Out>, but the compiler cannot see that through the generic.
    return this.#counted(() => this.#channel.request(call as unknown as OmitId<Out> & { type: 'call' }));
  }

  /**
   * Calls a method of a class actor (protocol/class-actor.ts); counted in flight like a call, so
   * the head balances instances on it. Only the head's link to a class actor sends these.
   */
  invoke(method: string, args: unknown[], tensors?: boolean, signal?: AbortSignal, origin?: InvokeOrigin): Promise<InvokeReply> {
    const channel = this.#channel as unknown as Channel<In, Out, { invoke: typeof InvokeReplySchema }>;
    const id = newId();
    const message = {
      type: 'invoke',
      id,
      method,
      args,
      ...(tensors ? { tensors: true } : {}),
      ...(origin?.via?.length ? { via: origin.via } : {}),
      ...(origin?.timeoutMs !== undefined ? { timeoutMs: Math.max(1, origin.timeoutMs) } : {}),
      ...(origin?.viaGroups?.length ? { viaGroups: origin.viaGroups } : {}),
      ...(origin?.group !== undefined ? { group: origin.group } : {}),
    };
    // The call stays counted in flight until the instance answers it: a cancelled method that
    // goes on running still holds its slot there, and the queue must not send past it.
    const cancel = () => this.#channel.send({ type: 'invokeCancel', call: id } as unknown as Out);
    signal?.addEventListener('abort', cancel, { once: true });
    return this.#counted(() => channel.request(message as unknown as OmitId<Out> & { type: 'invoke' })).finally(() =>
      signal?.removeEventListener('abort', cancel),
    );
  }

  /**
   * A streaming call of a class actor's async generator method: `onItem` gets each item as it
   * arrives; `credit(n)` lets the actor send n more, `cancel()` stops it. `done` settles after the
   * last item with their count (a lost connection: TROUPE_ERR_ACTOR_DIED, like a call).
   */
  invokeStream(
    method: string,
    args: unknown[],
    credit: number,
    onItem: (seq: number, value: unknown) => void,
    tensors = false,
    group?: string,
  ): LinkStream {
    const channel = this.#channel as unknown as Channel<In, Out, { invoke: typeof InvokeReplySchema }>;
    const id = newId();
    this.#streams.set(id, onItem);
    const message = {
      type: 'invoke',
      id,
      method,
      args,
      credit,
      ...(tensors ? { tensors: true } : {}),
      ...(group !== undefined ? { group } : {}),
    };
    const done = this.#counted(() => channel.request(message as unknown as OmitId<Out> & { type: 'invoke' })).finally(() =>
      this.#streams.delete(id),
    );
    const send = (m: unknown) => this.#channel.send(m as Out);
    return {
      done,
      credit: (n) => send({ type: 'streamCredit', stream: id, n }),
      cancel: () => send({ type: 'streamCancel', stream: id }),
    };
  }

  /**
   * Asks a multiplexed replica about the models of its set (protocol/actor.ts `tenant`). Not
   * counted in flight: it is no call, and must not steer the calls' balance.
   */
  tenant(op: 'scan' | 'describe' | 'load' | 'unload', model: string | undefined, timeoutMs: number): Promise<TenantReply> {
    const channel = this.#channel as unknown as Channel<In, Out, { tenant: typeof TenantReplySchema }>;
    const message = { type: 'tenant', op, ...(model !== undefined ? { model } : {}) };
    return channel.request(message as unknown as OmitId<Out> & { type: 'tenant' }, timeoutMs);
  }

  /** An item of one of this link's streams (unknown ones, of streams already over, are dropped). */
  streamItem(item: StreamItem): void {
    this.#streams.get(item.stream)?.(item.seq, item.value);
  }

  async #counted<T>(send: () => Promise<T>): Promise<T> {
    this.#inFlight++;
    try {
      return await send();
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
