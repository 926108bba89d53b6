import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Where a call made inside a class actor's method comes from: the instances whose running calls
 * wait on it (outermost first, this one last) and the deadline of the call running here. The
 * actor process sets it around each method (actors/call-context.ts); the SDK reads it when a
 * method makes a call of its own, so the head sees cycles (A -> B -> A) and the deadline travels.
 */
export interface CallOrigin {
  /** Instance ids, outermost first: the last is the instance the call is made from. */
  via: string[];
  /** The concurrency group of each instance's waiting call in `via`, in the same order (absent: unknown, taken as `default`). */
  groups?: string[] | undefined;
  /** Date.now() past which the caller of the running call no longer waits; absent: none. */
  deadline?: number | undefined;
}

/** The most instances a chain of nested calls may pass through. */
export const MAX_CALL_DEPTH = 64;

// One store per process, even if a class module loads another copy of the SDK than the actor's own.
const KEY = Symbol.for('troupe.callOrigin');
const holder = globalThis as { [KEY]?: AsyncLocalStorage<CallOrigin> };
const store = (holder[KEY] ??= new AsyncLocalStorage<CallOrigin>());

/** The origin of the call running here, inside a class actor's method; undefined elsewhere. */
export function currentCallOrigin(): CallOrigin | undefined {
  return store.getStore();
}

/** Runs `work` as part of the call described by `origin`. */
export function withCallOrigin<T>(origin: CallOrigin, work: () => T): T {
  return store.run(origin, work);
}
