import { TroupeError } from '../../runtime/internal.js';
import type { DeploymentView } from '../../runtime/internal.js';
import { deployTimeoutMessage } from '../../runtime/deploy-timeout.js';

/**
 * TROUPE_ERR_DEPLOY_TIMEOUT, carrying the deployments as they were when the bound passed, so the
 * HTTP route can answer 202 with each actor's state and reason (the SDK gets only code and message).
 */
export class DeployTimeoutError extends TroupeError {
  readonly views: DeploymentView[];

  constructor(message: string, views: DeploymentView[]) {
    super('TROUPE_ERR_DEPLOY_TIMEOUT', message);
    this.views = views;
  }
}

/**
 * Waits for a deploy's `ready` at most `timeoutMs`, then rejects with a {@link DeployTimeoutError}
 * naming every actor not READY (from `views()`, read at that moment). Nothing is undone: the
 * controller keeps placing the deployment, as Kubernetes keeps a Deployment whose pods are Pending.
 */
export function boundDeploy<T>(
  ready: Promise<T>,
  timeoutMs: number,
  what: { kind: 'deployment' | 'graph'; name: string },
  views: () => DeploymentView[],
): Promise<T> {
  // `ready` may still fail after the caller stopped waiting (the deployment is removed, the head
  // shuts down); nobody is listening then, and that must not be an unhandled rejection.
  ready.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      try {
        const now = views();
        reject(new DeployTimeoutError(deployTimeoutMessage(what, now, timeoutMs), now));
      } catch (err) {
        // A throw in a timer callback would take the head down; the caller gets it instead.
        reject(err);
      }
    }, timeoutMs);
  });
  return Promise.race([ready, expired]).finally(() => clearTimeout(timer));
}
