import type { Cluster } from './cluster.js';

/**
 * What a class actor's method sees of the call it runs, as `this.context` (docs/actors.md,
 * Cancelling calls). A context object rather than an extra last argument: a method's own optional
 * arguments stay its own (`get(key, ms = 100)` would take a signal for `ms`), and with
 * maxConcurrency above 1 each call still sees its own signal, since the runtime keeps the context
 * per call (across the method's awaits) and `this.context` reads the current one.
 *
 * @example
 * import type { ActorContext } from 'troupe';
 * export class Crawler {
 *   declare readonly context: ActorContext;          // set by the runtime; `declare` emits no field
 *   async fetchAll(urls: string[]) {
 *     const out = [];
 *     for (const url of urls) {
 *       this.context.signal.throwIfAborted();        // the caller cancelled: stop here
 *       out.push(await (await fetch(url, { signal: this.context.signal })).text());
 *     }
 *     return out;
 *   }
 * }
 */
export interface ActorContext {
  /**
   * Aborts when the call's caller cancels it (`future.cancel()`, an aborted `signal` in its call
   * options, a closed HTTP request) or, in a streaming method, when the reader stops reading.
   * Outside a call (in `checkpoint()`, `restore()`) it never aborts.
   */
  readonly signal: AbortSignal;
  /**
   * Date.now() past which the caller no longer waits for this call (its `timeoutMs`), or undefined.
   * Calls the method makes inherit it: each is bounded by the time left (docs/actors.md).
   */
  readonly deadline: number | undefined;
  /** The deployment this instance belongs to. */
  readonly deployment: string;
  /** This instance's actor id (as `describe()` lists it). */
  readonly instance: string;
  /**
   * A client of the cluster this instance runs in, opened on first use and kept for the
   * instance's life (no `connect()` of your own); the head knows its calls come from this instance.
   */
  cluster(): Promise<Cluster>;
}
