import type { DeploymentView, ModelDeployment, TroupeError } from '../../runtime/internal.js';

interface Waiter {
  resolve: (view: DeploymentView) => void;
  reject: (err: TroupeError) => void;
}

interface Pending {
  waiters: Set<Waiter>;
  /** The spec in force before the first of these deploys (null: the deployment did not exist). */
  before: ModelDeployment | null;
}

/** Deploy calls waiting, per deployment, for every replica to be READY (or for a failure). */
export class ReadyWaiters {
  readonly #pending = new Map<string, Pending>();

  /**
   * `before` is what a refused deploy goes back to. Only the first waiter's counts: a second deploy
   * of the same name while the first still waits builds on a spec nobody has seen work yet.
   */
  wait(name: string, before: ModelDeployment | null): Promise<DeploymentView> {
    return new Promise((resolve, reject) => {
      const pending = this.#pending.get(name) ?? { waiters: new Set(), before };
      pending.waiters.add({ resolve, reject });
      this.#pending.set(name, pending);
    });
  }

  /** What deploys waiting on `name` would go back to, or undefined when none waits. */
  before(name: string): ModelDeployment | null | undefined {
    return this.#pending.get(name)?.before;
  }

  /**
   * Takes the waiters of `name` out now and returns what settles them, for an outcome that is only
   * known later: a deploy of the same name meanwhile waits anew instead of getting this outcome.
   */
  take(name: string): (outcome: DeploymentView | TroupeError) => void {
    const pending = this.#pending.get(name);
    this.#pending.delete(name);
    return (outcome) => {
      for (const w of pending?.waiters ?? []) {
        if (outcome instanceof Error) w.reject(outcome);
        else w.resolve(outcome);
      }
    };
  }

  settle(name: string, outcome: DeploymentView | TroupeError): void {
    this.take(name)(outcome);
  }

  settleAll(error: TroupeError): void {
    for (const name of [...this.#pending.keys()]) this.settle(name, error);
  }
}
