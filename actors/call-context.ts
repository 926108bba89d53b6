import { AsyncLocalStorage } from 'node:async_hooks';
import { ActorHandle, TroupeError, connect, withCallOrigin } from '../runtime/internal.js';
import type { ActorContext, ActorReference, ActorTransport, CallOrigin, Cluster } from '../runtime/internal.js';

/** Where the instance is: what its context names, and the head its own client connects to. */
export interface ContextPlace {
  headUrl?: string | undefined;
  deployment: string;
  instance: string;
}

/**
 * The per-call contexts of one class instance (`this.context`, runtime/client/actor-context.ts).
 * Each call runs inside its own context (AsyncLocalStorage), so with maxConcurrency above 1 every
 * call sees its own signal across its awaits, while `this.context` is one getter on the instance.
 */
export class CallContexts {
  readonly #current = new AsyncLocalStorage<ActorContext>();
  readonly #place: ContextPlace;
  /** Outside any call: a signal that never aborts. */
  readonly #outside: ActorContext;
  #cluster: Promise<Cluster> | undefined;

  constructor(place: ContextPlace) {
    this.#place = place;
    this.#outside = this.#context(new AbortController().signal);
  }

  /** Defines `context` on `instance`; a class that uses the name itself is refused, since its methods would read the wrong thing. */
  install(instance: object, className: string): void {
    if ((instance as { context?: unknown }).context !== undefined)
      throw new TroupeError(
        'TROUPE_ERR_MODEL_LOAD',
        `class '${className}' defines 'context', a name class actors keep for the call's context (this.context.signal, this.context.cluster()): rename it`,
      );
    Object.defineProperty(instance, 'context', {
      get: () => this.#current.getStore() ?? this.#outside,
      configurable: false,
      enumerable: false,
    });
  }

  /**
   * Runs `work` (a call, or a step of a stream's generator) with `signal` as its context's, and
   * `origin` (the chain of instances waiting on it, its deadline) for the calls it makes.
   */
  run<T>(signal: AbortSignal, work: () => T, origin?: CallOrigin): T {
    const context = this.#context(signal, origin?.deadline);
    return this.#current.run(context, () => (origin ? withCallOrigin(origin, work) : work()));
  }

  /**
   * A handle that arrived as a value (an argument): usable at once, on the instance's own client,
   * which the first call through it opens. Calls through it keep their order, as on any handle.
   */
  handle(ref: ActorReference): ActorHandle {
    const via = (use: (t: ActorTransport) => void, failed?: (err: unknown) => void) =>
      void this.#openCluster().then((c) => use(c.actorTransport), failed ?? (() => {}));
    const transport: ActorTransport = {
      call: (message, timeoutMs) => this.#openCluster().then((c) => c.actorTransport.call(message, timeoutMs)),
      stream: (message, stream) =>
        via(
          (t) => t.stream(message, stream),
          (err) => stream.fail(err),
        ),
      credit: (id, n) => via((t) => t.credit(id, n)),
      cancel: (id) => via((t) => t.cancel(id)),
      cancelCall: (id) => via((t) => t.cancelCall(id)),
    };
    return new ActorHandle(ref.actor, transport, ref.sessionKey === undefined ? {} : { sessionKey: ref.sessionKey });
  }

  /** Closes the instance's own client, if it opened one. */
  async close(): Promise<void> {
    const cluster = this.#cluster;
    this.#cluster = undefined;
    await cluster?.then((c) => c.close()).catch(() => {});
  }

  #context(signal: AbortSignal, deadline?: number): ActorContext {
    const place = this.#place;
    return {
      signal,
      deadline,
      deployment: place.deployment,
      instance: place.instance,
      cluster: () => this.#openCluster(),
    };
  }

  #openCluster(): Promise<Cluster> {
    const url = this.#place.headUrl;
    if (url === undefined) return Promise.reject(new TroupeError('TROUPE_ERR_NOT_READY', 'this instance was given no head address'));
    // One client for the instance's life; a failed connect is forgotten so the next call tries again.
    this.#cluster ??= connect(url).catch((err: unknown) => {
      this.#cluster = undefined;
      throw err;
    });
    return this.#cluster;
  }
}
