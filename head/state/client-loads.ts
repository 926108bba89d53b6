/** A client connection: reports end with it. */
interface Client {
  readonly whenClosed: Promise<void>;
}

/** A report older than this no longer counts: its client went quiet or away. */
const STALE_MS = 2000;

interface Report {
  at: number;
  loads: Record<string, { queued: number; inFlight: number }>;
}

/**
 * The load SDK clients hold for deployments they call directly, as they last reported it. Added
 * to the head's own queue and in-flight calls, it is what the autoscaler sizes deployments by.
 */
export class ClientLoads {
  readonly #reports = new Map<Client, Report>();

  report(client: Client, loads: Report['loads']): void {
    if (!this.#reports.has(client)) void client.whenClosed.then(() => this.#reports.delete(client));
    this.#reports.set(client, { at: Date.now(), loads });
  }

  /** Calls waiting in clients' queues and in flight from clients to `deployment`'s replicas, now. */
  of(deployment: string): { queued: number; inFlight: number } {
    const now = Date.now();
    let queued = 0;
    let inFlight = 0;
    for (const [client, r] of this.#reports) {
      if (now - r.at > STALE_MS) {
        this.#reports.delete(client);
        continue;
      }
      const load = r.loads[deployment];
      if (load) {
        queued += load.queued;
        inFlight += load.inFlight;
      }
    }
    return { queued, inFlight };
  }
}
