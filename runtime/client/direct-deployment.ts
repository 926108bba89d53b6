import { WebSocket } from 'ws';
import { z } from 'zod';
import { CallQueue } from '../dispatch/call-queue.js';
import type { QueueTarget, Replica } from '../dispatch/call-queue.js';
import { ReplicaLink } from '../dispatch/replica-link.js';
import type { HeadToActor } from '../protocol/actor.js';
import type { Routes } from '../protocol/routes.js';
import { Channel } from '../transport/channel.js';
import { clientSocketOptions } from '../transport/socket-options.js';

/** An actor sends nothing on a direct socket but answers to calls; anything else is refused. */
const NothingSchema = z.object({ type: z.literal('nothing') });
type Nothing = z.infer<typeof NothingSchema>;

const CONNECT_TIMEOUT_MS = 5000;
/**
 * How long a replica that left the routes may take to answer the calls it still holds: a draining
 * one answers them (agents give actors 5 s), one on a node the head declared DEAD may never; its
 * calls then fail as ACTOR_DIED and the queue retries them on another replica.
 */
const LEAVE_GRACE_MS = 10_000;

interface Entry {
  url: string;
  link: ReplicaLink<Nothing> | undefined;
  ws: WebSocket;
  /** The socket closed or never opened: no more calls go here. */
  dead: boolean;
}

/**
 * One deployment's replicas as this client calls them directly, and the client's own queue in
 * front of them: the same pull-based {@link CallQueue} the head runs, with the limits the head
 * sent, so a call waits here only while every replica holds its share of this client's calls.
 */
export class DirectDeployment implements QueueTarget {
  readonly name: string;
  maxQueue = 0;
  maxRetries = 0;
  perReplicaLimit = 2;
  readonly queue: CallQueue = new CallQueue(this);
  readonly #entries = new Map<string, Entry>();

  constructor(name: string) {
    this.name = name;
  }

  /** Whether some replica's socket is open now. */
  get usable(): boolean {
    for (const e of this.#entries.values()) if (e.link && !e.dead) return true;
    return false;
  }

  /** Calls waiting in this client's queue, and sent to replicas but not answered. */
  get load(): { queued: number; inFlight: number } {
    let inFlight = 0;
    for (const e of this.#entries.values()) inFlight += e.link?.inFlight ?? 0;
    return { queued: this.queue.queued, inFlight };
  }

  update(routes: Routes): void {
    this.maxQueue = routes.maxQueue;
    this.maxRetries = routes.maxRetries;
    this.perReplicaLimit = routes.perReplicaLimit;
    const wanted = new Map(routes.replicas.map((r) => [r.actor, r]));
    for (const [actor, entry] of this.#entries) {
      const next = wanted.get(actor);
      if (next && next.url === entry.url && !entry.dead) continue;
      this.#entries.delete(actor);
      this.#retire(entry);
    }
    for (const r of routes.replicas) if (!this.#entries.has(r.actor)) this.#open(r.actor, r.url, r.token);
    this.queue.pump();
  }

  *replicas(): Iterable<Replica> {
    for (const e of this.#entries.values()) if (e.link && !e.dead) yield e.link;
  }

  couldServe(): boolean {
    for (const e of this.#entries.values()) if (!e.dead) return true;
    return false;
  }

  describeReplicas(): string {
    return [...this.#entries.values()].map((e) => `${e.url} ${e.dead ? 'unreachable' : e.link ? 'open' : 'connecting'}`).join(', ') || 'no replicas';
  }

  close(): void {
    for (const entry of this.#entries.values()) entry.ws.terminate();
    this.#entries.clear();
  }

  #open(actor: string, url: string, token: string): void {
    const ws = new WebSocket(url, { ...clientSocketOptions({ authorization: `Bearer ${token}` }), handshakeTimeout: CONNECT_TIMEOUT_MS });
    const entry: Entry = { url, link: undefined, ws, dead: false };
    this.#entries.set(actor, entry);
    const fail = () => {
      if (entry.dead) return;
      entry.dead = true;
      // Waiting calls go to another replica, or, with none left, back through the head.
      this.queue.pump();
    };
    ws.once('error', fail);
    ws.once('unexpected-response', () => (ws.terminate(), fail()));
    ws.once('open', () => {
      const channel = new Channel<Nothing, HeadToActor>(ws, { schema: NothingSchema, onMessage: () => {}, onClose: fail });
      entry.link = new ReplicaLink(channel);
      this.queue.pump();
    });
  }

  /** A replica that left the routes gets no new calls; its socket closes once it has answered the rest. */
  #retire(entry: Entry): void {
    const link = entry.link;
    if (!link || entry.dead) {
      entry.ws.terminate();
      return;
    }
    entry.dead = true;
    void link.whenIdle(LEAVE_GRACE_MS).then(() => {
      if (link.inFlight === 0) link.close('replica left the routes');
      else link.terminate(`it left the routes and did not answer within ${LEAVE_GRACE_MS / 1000} s`);
    });
  }
}
