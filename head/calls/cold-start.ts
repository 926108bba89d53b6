import { MAX_QUEUE_WAIT_MS, TroupeError } from '../../runtime/internal.js';
import type { ModelDeployment } from '../../runtime/internal.js';

interface Waiter {
  resolve: () => void;
  reject: (error: TroupeError) => void;
  timer: NodeJS.Timeout;
}

/**
 * Whether a deployment starts replicas on demand: an autoscaled one may stand at zero replicas, so
 * a call that finds none waits for one instead of failing.
 */
export function startsOnDemand(spec: ModelDeployment): boolean {
  return spec.autoscale !== undefined;
}

/**
 * Calls to a deployment that no replica has described yet (scaled from zero before its first
 * replica ever ran): each waits, within its deadline, for the first replica to be READY and say
 * what it takes, so it can be checked against the model's inputs like any other call. The
 * autoscaler counts them as load.
 */
export class ColdStart {
  readonly #waiters = new Set<Waiter>();

  get waiting(): number {
    return this.#waiters.size;
  }

  /**
   * Resolves once {@link ready} is called; TROUPE_ERR_DEADLINE_EXCEEDED at `deadline` (or after the
   * longest queue wait), saying what its replicas were doing then (`replicas`: e.g. PENDING and why).
   */
  wait(deployment: string, deadline: number | undefined, replicas: () => string): Promise<void> {
    const waitMs = Math.max(0, Math.min(deadline === undefined ? MAX_QUEUE_WAIT_MS : deadline - Date.now(), MAX_QUEUE_WAIT_MS));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters.delete(waiter);
          reject(
            new TroupeError(
              'TROUPE_ERR_DEADLINE_EXCEEDED',
              `no replica of '${deployment}' was READY within ${waitMs} ms of the call (${replicas()})`,
            ),
          );
        }, waitMs),
      };
      this.#waiters.add(waiter);
    });
  }

  /** A replica is READY and the deployment's signature known: every waiting call goes on. */
  ready(): void {
    for (const w of this.#waiters) {
      clearTimeout(w.timer);
      w.resolve();
    }
    this.#waiters.clear();
  }

  /** The deployment is gone: every waiting call fails with `why`. */
  fail(why: TroupeError): void {
    for (const w of this.#waiters) {
      clearTimeout(w.timer);
      w.reject(why);
    }
    this.#waiters.clear();
  }
}
