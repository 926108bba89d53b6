import { TroupeError, WireTensorMapSchema } from '../runtime/index.js';
import type { ActorToHead, Channel, HeadToActor, WireTensorMap } from '../runtime/index.js';

/** The head's end of one actor's data-plane socket. */
export class ActorLink {
  readonly #channel: Channel<ActorToHead, HeadToActor>;
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(channel: Channel<ActorToHead, HeadToActor>) {
    this.#channel = channel;
  }

  /** Calls sent to the actor and not yet answered. */
  get inFlight(): number {
    return this.#inFlight;
  }

  get closed(): boolean {
    return this.#channel.closed;
  }

  async call(inputs: WireTensorMap, outputs?: string[]): Promise<WireTensorMap> {
    this.#inFlight++;
    try {
      const value = (await this.#channel.request({ type: 'call', inputs, ...(outputs ? { outputs } : {}) })) as
        | { outputs?: unknown }
        | undefined;
      const parsed = WireTensorMapSchema.safeParse(value?.outputs);
      if (!parsed.success) throw new TroupeError('TROUPE_ERR_INTERNAL', 'actor answered without output tensors');
      return parsed.data;
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'TROUPE_ERR_CONNECTION_CLOSED') {
        throw new TroupeError('TROUPE_ERR_ACTOR_DIED', 'the actor exited before answering');
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
}
