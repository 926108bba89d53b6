import { TroupeError } from '../../runtime/internal.js';
import type { ModelDeployment } from '../../runtime/internal.js';
import type { DeploymentRecord } from '../state/records.js';
import { needsNewActors } from '../state/record-changes.js';

/**
 * A deploy that fails for what it asks for (4xx, not retryable: a path outside the model
 * directory, a file onnxruntime will not load, a fn that is not exported) is refused, and a
 * refused deploy changes nothing (the controller undoes it). Failures that say nothing about the
 * spec (an actor that keeps dying, a node lost, a deploy past its bound, a head shutting down)
 * are 5xx or retryable: the deployment stays, as Kubernetes keeps a Deployment whose pods crash.
 */
export function isRefusal(error: TroupeError): boolean {
  return error.status >= 400 && error.status < 500 && !error.retryable;
}

/**
 * What undoing a refused deploy did: removed a deployment it created; put back the spec it
 * replaced, on the actors still running (`restored`) or on new ones, because the refused spec had
 * replaced them (`restarted`); or nothing, when it asked for the spec already in force.
 */
export type RefusalOutcome = 'removed' | 'restored' | 'restarted' | 'unchanged';

export function refusalOutcome(before: ModelDeployment | null, refused: ModelDeployment): RefusalOutcome {
  if (!before) return 'removed';
  if (JSON.stringify(before) === JSON.stringify(refused)) return 'unchanged';
  return needsNewActors(refused, before) ? 'restarted' : 'restored';
}

/** The refusal as its caller hears it: the cause, then what became of the deployment. */
export function refusedError(error: TroupeError, name: string, before: ModelDeployment | null, outcome: RefusalOutcome): TroupeError {
  const previous = before ? `${before.replicas} replica(s) of ${before.model}` : '';
  const said = {
    removed: `deployment '${name}' was not created`,
    restored: `deployment '${name}' keeps its previous spec (${previous})`,
    restarted: `deployment '${name}' is back to its previous spec (${previous}), whose replicas start again`,
    unchanged: `deployment '${name}' keeps its spec`,
  }[outcome];
  return new TroupeError(error.code, `${error.message}; ${said}`);
}

/** The first and the longest wait before a deployment scaled to zero starts a replica again after a refused start. */
const MIN_START_BACKOFF_MS = 1000;
const MAX_START_BACKOFF_MS = 60_000;

/**
 * A start from zero (the autoscaler's, for waiting calls) that cannot succeed: the calls fail now,
 * with why, and the next start waits, doubling while it keeps being refused (DeploymentRecord.startRefused).
 */
export function refuseStartsFromZero(d: DeploymentRecord, refused: TroupeError, now: number): void {
  const backoffMs = Math.min(MAX_START_BACKOFF_MS, (d.startRefused?.backoffMs ?? MIN_START_BACKOFF_MS / 2) * 2);
  d.startRefused = { error: refused, until: now + backoffMs, backoffMs };
  d.coldStart.fail(refused);
  d.dispatcher.failAll(refused);
}
