import type { DeploymentView, TroupeError } from '../runtime/index.js';

interface Waiter {
  resolve: (view: DeploymentView) => void;
  reject: (err: TroupeError) => void;
}

/** Deploy calls waiting, per deployment, for every replica to be READY (or for a failure). */
export class ReadyWaiters {
  readonly #waiters = new Map<string, Set<Waiter>>();

  wait(name: string): Promise<DeploymentView> {
    return new Promise((resolve, reject) => {
      const set = this.#waiters.get(name) ?? new Set();
      set.add({ resolve, reject });
      this.#waiters.set(name, set);
    });
  }

  settle(name: string, outcome: DeploymentView | TroupeError): void {
    const set = this.#waiters.get(name);
    if (!set) return;
    this.#waiters.delete(name);
    for (const w of set) outcome instanceof Error ? w.reject(outcome) : w.resolve(outcome);
  }

  settleAll(error: TroupeError): void {
    for (const name of [...this.#waiters.keys()]) this.settle(name, error);
  }
}
