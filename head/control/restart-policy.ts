import { newId } from '../../runtime/internal.js';
import type { ActorRecord } from '../state/records.js';

export interface RestartPolicy {
  /** Crashes within `restartWindowMs` after which an actor is DEAD. */
  maxRestarts: number;
  restartWindowMs: number;
}

/** The back-off before a crashed actor is placed again: 100 ms, doubling with each recent crash, at most 30 s. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 30_000;

/**
 * Records a crash of `a` at `now`: it leaves its node, and is DEAD past its restarts, or else
 * RESTARTING, to be placed again after the returned back-off. `own` is its deployment's
 * maxRestarts, which counts restarts over the replica's life as Ray's max_restarts does (-1:
 * without end); without one, the head's policy counts crashes within its window.
 */
export function recordCrash(
  a: ActorRecord,
  cause: string,
  policy: RestartPolicy,
  now = Date.now(),
  own?: number,
): { dead: true } | { dead: false; delayMs: number } {
  a.awaitingNode = null;
  a.nodeId = null;
  a.gpus = [];
  a.recentCrashes = [...a.recentCrashes.filter((t) => now - t < policy.restartWindowMs), now];
  if (own !== undefined ? own >= 0 && a.restarts >= own : a.recentCrashes.length > policy.maxRestarts) {
    a.state = 'DEAD';
    a.reason =
      own === 0
        ? `${cause}; not restarted (maxRestarts 0)`
        : own !== undefined
          ? `${cause}; gave up after ${own} restarts (maxRestarts ${own})`
          : `${cause}; gave up after ${policy.maxRestarts} restarts in ${Math.round(policy.restartWindowMs / 1000)} s`;
    return { dead: true };
  }
  a.state = 'RESTARTING';
  a.reason = cause;
  a.restarts++;
  return { dead: false, delayMs: Math.min(FIRST_BACKOFF_MS * 2 ** (a.recentCrashes.length - 1), MAX_BACKOFF_MS) };
}

/**
 * A new process of class instance `a` is READY (not one that rejoined with its memory). After
 * its first, it starts from its constructor unless the head holds a checkpoint to restore: then
 * what it held is gone, and its state gets a new identity so the sessions bound to it and the
 * clients that saw it are told (head/calls/method-queue.ts) instead of finding a fresh instance
 * answering as if nothing happened.
 */
export function noteFreshInstance(a: ActorRecord): void {
  if (a.stateId === undefined || (a.servedBefore && a.checkpoint === undefined)) a.stateId = newId();
  if (a.servedBefore && a.checkpoint === undefined) {
    a.stateLost = `instance ${a.name} restarted (${a.lastCrash ?? 'its process was replaced'}) with no checkpoint to restore (its class has no checkpoint(), or the head restarted since its last one)`;
  }
  a.servedBefore = true;
}
