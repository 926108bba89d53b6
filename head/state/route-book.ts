import { replicaCallLimit } from '../../runtime/internal.js';
import { servedLayout } from './deployment-layout.js';
import type { Channel, ClientToHead, HeadToClient, Routes } from '../../runtime/internal.js';
import type { DeploymentRecord } from './records.js';
import { versionName } from '../control/versions.js';

type ClientChannel = Channel<ClientToHead, HeadToClient>;

/**
 * Whether `b` says what `a` said, field by field. Not by comparing their JSON: during a deploy of
 * thousands of actors the watched deployments' routes were re-encoded after every change anywhere,
 * a cost of its own (bench/scale/HISTORY.md).
 */
function sameRoutes(a: Routes | undefined, b: Routes): boolean {
  if (!a || a.perReplicaLimit !== b.perReplicaLimit || a.maxQueue !== b.maxQueue || a.maxRetries !== b.maxRetries) return false;
  if (a.version !== b.version) return false;
  if (a.replicas.length !== b.replicas.length) return false;
  return a.replicas.every((r, i) => {
    const other = b.replicas[i]!;
    return r.actor === other.actor && r.url === other.url && r.token === other.token;
  });
}

/**
 * Tells SDK clients where each model deployment's READY replicas take direct calls, and pushes
 * the new list to every client that asked about a deployment whenever it changes (a replica
 * became READY, left, restarted, or the deployment was updated or removed). Pushes are coalesced
 * into one per microtask turn and leave before any answer queued after the change, so a client
 * that awaited a deploy already has its new replicas when the answer arrives.
 */
export class RouteBook {
  readonly #deployments: Map<string, DeploymentRecord>;
  readonly #subscribers = new Map<string, Set<ClientChannel>>();
  /** What each subscribed deployment's clients were last sent. */
  readonly #sent = new Map<string, Routes>();
  readonly #watchers = new Set<() => void>();
  #scheduled = false;

  constructor(deployments: Map<string, DeploymentRecord>) {
    this.#deployments = deployments;
  }

  routesOf(name: string): Routes {
    const d = this.#deployments.get(name);
    const replicas: Routes['replicas'] = [];
    // A multiplexed deployment's calls go through the head, which knows what each replica holds;
    // so do a split deployment's, which the head sends to one of its versions (it runs no replica
    // of its own, and one left over must never answer for the versions).
    if (d && (d.spec.kind ?? 'model') === 'model' && !d.spec.multiplex && !d.spec.versions) {
      for (const a of d.actors)
        if (a.state === 'READY' && a.link && a.direct) replicas.push({ actor: a.id, url: a.direct.url, token: a.direct.token });
    }
    const version = d ? versionName(d.spec) : undefined;
    return {
      deployment: name,
      ...(version !== undefined ? { version } : {}),
      replicas,
      perReplicaLimit: replicaCallLimit(d ? servedLayout(d).batchMaxSize : 1),
      maxQueue: d?.spec.maxQueue ?? 0,
      maxRetries: d?.spec.maxRetries ?? 0,
    };
  }

  /** The routes of `name` now; `channel` gets every later change until it closes. */
  subscribe(name: string, channel: ClientChannel): Routes {
    let set = this.#subscribers.get(name);
    if (!set) this.#subscribers.set(name, (set = new Set()));
    if (!set.has(channel)) {
      set.add(channel);
      void channel.whenClosed.then(() => {
        set.delete(channel);
        if (set.size === 0 && this.#subscribers.get(name) === set) {
          this.#subscribers.delete(name);
          this.#sent.delete(name);
        }
      });
    }
    const routes = this.routesOf(name);
    this.#sent.set(name, routes);
    return routes;
  }

  /** Calls `listener` once per microtask turn in which deployments or actors changed; returns the way to stop. */
  watch(listener: () => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /** Something about deployments or actors changed: push the routes that differ from those sent. */
  changed(): void {
    if (this.#scheduled || (this.#subscribers.size === 0 && this.#watchers.size === 0)) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      for (const listener of this.#watchers) listener();
      for (const [name, channels] of this.#subscribers) {
        const routes = this.routesOf(name);
        if (sameRoutes(this.#sent.get(name), routes)) continue;
        this.#sent.set(name, routes);
        for (const channel of channels) channel.send({ type: 'routes', routes });
      }
    });
  }
}
