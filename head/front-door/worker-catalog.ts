/** How long a worker waits for the head to answer a lookup before it answers the request from what it has. */
const LOOKUP_TIMEOUT_MS = 5_000;

/**
 * A front-door worker's copy of the head's deployments: replaced whenever the head pushes a new
 * one, and asked of the head itself for a name it lacks or knows no signature of yet, so a
 * request that follows a deploy at once never sees a stale 404.
 */
export class WorkerCatalog {
  readonly #ask: (id: number, name: string) => void;
  #targets = new Map<string, InferTarget>();
  readonly #waiting = new Map<number, (target: InferTarget | null) => void>();
  #nextId = 0;

  constructor(ask: (id: number, name: string) => void) {
    this.#ask = ask;
  }

  replace(targets: readonly InferTarget[]): void {
    this.#targets = new Map(targets.map((t) => [t.name, t]));
  }

  answered(id: number, target: InferTarget | null): void {
    this.#waiting.get(id)?.(target);
    this.#waiting.delete(id);
  }

  /**
   * At once from the catalog when it knows the name and its signature (a graph's is known when it
   * is registered, even when a fn step leaves it open); else after asking the head.
   */
  target(params: Params): InferTarget | Promise<InferTarget> {
    const { deployment } = splitModelName(params.name);
    const known = this.#targets.get(deployment);
    if (known && (known.metadata || known.kind === 'graph')) return this.#find(params);
    return this.#lookup(deployment).then((fresh) => {
      if (fresh) this.#targets.set(fresh.name, fresh);
      else if (fresh === null) this.#targets.delete(deployment);
      return this.#find(params);
    });
  }

  #find(params: Params): InferTarget {
    return findTarget(params, (name) => this.#targets.get(name));
  }

  #lookup(name: string): Promise<InferTarget | null | undefined> {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => (this.#waiting.delete(id), resolve(undefined)), LOOKUP_TIMEOUT_MS);
      this.#waiting.set(id, (target) => (clearTimeout(timer), resolve(target)));
      this.#ask(id, name);
    });
  }
}
import { findTarget, splitModelName } from '../../runtime/internal.js';
import type { InferTarget, Params } from '../../runtime/internal.js';
