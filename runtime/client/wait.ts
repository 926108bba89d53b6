import { TroupeError } from '../errors.js';
import { Future } from './future.js';

export interface WaitOptions {
  /** How many futures to wait for (default 1, as Ray's `num_returns`); at most as many as given. */
  numReturns?: number;
  /** Give up waiting after this many milliseconds and answer with what is ready then (default: no limit). */
  timeoutMs?: number;
}

/** What {@link wait} answers: the futures that settled and those that did not, each in the order given. */
export interface WaitResult<F> {
  ready: F[];
  pending: F[];
}

/** Checks what `wait` was given, as Ray's `ray.wait` does; the error names what is wrong. */
function check(futures: readonly unknown[], numReturns: unknown, timeoutMs: unknown): void {
  if (!Array.isArray(futures)) throw new TroupeError('TROUPE_ERR_BAD_INPUT', 'wait(futures) takes an array of Futures');
  futures.forEach((f, i) => {
    if (!(f instanceof Future))
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `wait(futures): futures[${i}] is not a Future (a run's or a call's)`);
  });
  if (new Set(futures).size !== futures.length)
    throw new TroupeError('TROUPE_ERR_BAD_INPUT', 'wait(futures): each Future may be given once (as Ray, which asks for unique refs)');
  if (typeof numReturns !== 'number' || !Number.isInteger(numReturns) || numReturns < 1 || numReturns > Math.max(1, futures.length))
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `wait(futures, { numReturns }): numReturns must be a whole number from 1 to the ${futures.length} futures given, got ${String(numReturns)}`,
    );
  if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0))
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `wait(futures, { timeoutMs }): timeoutMs must be a number of at least 0, got ${String(timeoutMs)}`,
    );
}

/**
 * Waits until `numReturns` of `futures` (runs' and calls' Futures, mixed as you like) have settled,
 * or `timeoutMs` passed, and answers which are `ready` and which still `pending`, as Ray's
 * `ray.wait`: a future that failed is ready too (await it for its error), `ready` holds at most
 * `numReturns` of them, and both keep the order the futures were given in. Waiting cancels
 * nothing: a pending future goes on and can be waited for again.
 *
 * @example
 * const futures = [1, 2, 3].map((n) => counter.call('add', n));
 * const { ready, pending } = await wait(futures, { numReturns: 2, timeoutMs: 5_000 });
 * for (const f of ready) console.log(await f);
 */
export function wait<F extends Future<unknown>>(futures: readonly F[], options: WaitOptions = {}): Promise<WaitResult<F>> {
  const { numReturns = 1, timeoutMs } = options;
  try {
    check(futures, numReturns, timeoutMs);
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let answered = false;
    const answer = () => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      const result: WaitResult<F> = { ready: [], pending: [] };
      for (const f of futures) (result.ready.length < numReturns && f.status() !== 'pending' ? result.ready : result.pending).push(f);
      resolve(result);
    };
    let settled = futures.filter((f) => f.status() !== 'pending').length;
    if (settled >= numReturns || futures.length === 0) return answer();
    // A future's own status handler runs before these (it was registered first), so each sees it settled.
    const onSettled = () => {
      if (++settled >= numReturns) answer();
    };
    for (const f of futures) if (f.status() === 'pending') f.then(onSettled, onSettled);
    if (timeoutMs !== undefined) timer = setTimeout(answer, timeoutMs);
  });
}
