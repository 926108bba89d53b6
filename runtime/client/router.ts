import type { ConnectionOptions } from 'node:tls';
import { TroupeError } from '../errors.js';
import type { CallQueue } from '../dispatch/call-queue.js';
import type { Routes } from '../protocol/routes.js';
import type { SharedTensorPool } from '../shm/tensor-pool.js';
import { DirectDeployment } from './direct-deployment.js';

/** Asks the head for a deployment's routes (and subscribes to their changes). */
export type AskRoutes = (deployment: string) => Promise<Routes>;
/** Tells the head the load this client holds for deployments it calls directly. */
export type ReportLoad = (loads: Record<string, { queued: number; inFlight: number }>) => void;

/** How often the load is reported while there is any (the head's autoscaler looks every 250 ms). */
const REPORT_EVERY_MS = 250;

/**
 * Decides, call by call, whether this client sends a run straight to a replica or through the
 * head. The first run of a deployment goes through the head while its routes are asked for;
 * once a replica's socket is open, runs go direct. Graphs, fns and deployments with no replica
 * serving directly have no routes and keep going through the head.
 */
export class DirectRouter {
  readonly #ask: AskRoutes;
  readonly #report: ReportLoad;
  readonly #deployments = new Map<string, DirectDeployment>();
  /** Deployments whose routes were asked for on the current head connection. */
  readonly #asked = new Set<string>();
  #reporter: NodeJS.Timeout | undefined;
  #reportedLoad = false;
  /** Shared memory for large inputs to replicas on this host, or why every tensor goes in its frame. */
  readonly sharedMemory: SharedTensorPool | string;
  /** How replicas are called when this client reached the head over TLS (see DirectDeployment). */
  readonly #tls: ConnectionOptions | undefined;

  constructor(ask: AskRoutes, report: ReportLoad, sharedMemory: SharedTensorPool | string, tls?: ConnectionOptions) {
    this.#ask = ask;
    this.#report = report;
    this.sharedMemory = sharedMemory;
    this.#tls = tls;
  }

  /** The client-side queue for `deployment` if a replica takes direct calls now. */
  queueFor(deployment: string): CallQueue | undefined {
    const d = this.#deployments.get(deployment);
    if (d?.usable) return d.queue;
    if (!this.#asked.has(deployment)) this.#request(deployment);
    return undefined;
  }

  /** The version `deployment` runs, when it runs one of a split deployment (as its routes said). */
  versionOf(deployment: string): string | undefined {
    return this.#deployments.get(deployment)?.version;
  }

  /** Routes from the head, answered or pushed. */
  update(routes: Routes): void {
    let d = this.#deployments.get(routes.deployment);
    if (!d)
      this.#deployments.set(
        routes.deployment,
        (d = new DirectDeployment(routes.deployment, typeof this.sharedMemory === 'string' ? undefined : this.sharedMemory, this.#tls)),
      );
    d.update(routes);
    if (!this.#reporter) {
      this.#reporter = setInterval(() => this.#reportLoad(), REPORT_EVERY_MS);
      // Reporting alone must not keep a process alive.
      this.#reporter.unref();
    }
  }

  /** A new head connection knows none of our subscriptions: ask again for the deployments in use. */
  reconnected(): void {
    const names = [...this.#asked];
    this.#asked.clear();
    for (const name of names) this.#request(name);
  }

  close(): void {
    clearInterval(this.#reporter);
    for (const d of this.#deployments.values()) d.close();
    this.#deployments.clear();
  }

  /** Sends the load while there is some, and once more when it drops to none. */
  #reportLoad(): void {
    const loads: Record<string, { queued: number; inFlight: number }> = {};
    let any = false;
    for (const [name, d] of this.#deployments) {
      const load = d.load;
      if (load.queued + load.inFlight === 0) continue;
      loads[name] = load;
      any = true;
    }
    if (any || this.#reportedLoad) this.#report(loads);
    this.#reportedLoad = any;
  }

  #request(deployment: string): void {
    this.#asked.add(deployment);
    this.#ask(deployment).then(
      (routes) => this.update(routes),
      (err: unknown) => {
        // A lost connection asks again on reconnect; a head that does not know `routes` (an
        // older one) is not asked again: runs keep going through it.
        if (err instanceof TroupeError && err.code === 'TROUPE_ERR_CONNECTION_CLOSED') this.#asked.delete(deployment);
      },
    );
  }
}
