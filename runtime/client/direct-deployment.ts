import type { ConnectionOptions } from 'node:tls';
import * as z from 'zod';
import { CallQueue } from '../dispatch/call-queue.js';
import type { QueueTarget, Replica } from '../dispatch/call-queue.js';
import { ReplicaLink } from '../dispatch/replica-link.js';
import { ClientToReplicaReplies } from '../protocol/actor.js';
import type { ClientToReplica } from '../protocol/actor.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../protocol/codec.js';
import type { Routes } from '../protocol/routes.js';
import type { SharedTensorPool } from '../shm/tensor-pool.js';
import { Channel } from '../transport/channel.js';
import { FrameStream } from '../transport/frame-stream.js';
import { SharedMemoryReplica } from './shared-memory-replica.js';

type ReplicaChannel = Channel<Nothing, ClientToReplica, typeof ClientToReplicaReplies>;

/** An actor sends nothing on a direct stream but answers to hello and calls; anything else is refused. */
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
  link: ReplicaLink<Nothing, ClientToReplica> | undefined;
  /** What the queue calls: the link, or the link putting large inputs in shared memory. */
  replica: Replica | undefined;
  /** Set once connected, even before the replica said the token is good. */
  channel: ReplicaChannel | undefined;
  /** The socket closed or never opened: no more calls go here. */
  dead: boolean;
  /** Aborted when this client lets go of the replica (it left the routes, or the client closed). */
  dropped: AbortController;
}

/** Host and port of a replica's `tcp://host:port` or `tls://host:port` address (IPv6 hosts in brackets), and whether it is TLS. */
function endpointOf(url: string): { host: string; port: number; tls: boolean } {
  const parsed = new URL(url);
  if ((parsed.protocol !== 'tcp:' && parsed.protocol !== 'tls:') || !parsed.port)
    throw new Error(`'${url}' is not a tcp:// or tls://host:port address`);
  return { host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(parsed.port), tls: parsed.protocol === 'tls:' };
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
  /** The version this deployment runs when it runs one of a deployment split between versions. */
  version: string | undefined;
  readonly queue: CallQueue = new CallQueue(this);
  readonly #entries = new Map<string, Entry>();
  readonly #sharedMemory: SharedTensorPool | undefined;
  readonly #tls: ConnectionOptions | undefined;

  /**
   * `sharedMemory`: this client's regions, offered to each replica (used where it runs on this host).
   * `tls`: this client reached the head over TLS; replicas are then called over TLS only, with these
   * options (runtime/transport/tls.ts replicaTlsOptions), and one that offers plain TCP is not called.
   */
  constructor(name: string, sharedMemory?: SharedTensorPool, tls?: ConnectionOptions) {
    this.name = name;
    this.#sharedMemory = sharedMemory;
    this.#tls = tls;
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
    this.version = routes.version;
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
    for (const e of this.#entries.values()) if (e.replica && !e.dead) yield e.replica;
  }

  couldServe(): boolean {
    for (const e of this.#entries.values()) if (!e.dead) return true;
    return false;
  }

  describeReplicas(): string {
    return (
      [...this.#entries.values()].map((e) => `${e.url} ${e.dead ? 'unreachable' : e.link ? 'open' : 'connecting'}`).join(', ') ||
      'no replicas'
    );
  }

  close(): void {
    for (const entry of this.#entries.values()) this.#drop(entry);
    this.#entries.clear();
  }

  #open(actor: string, url: string, token: string): void {
    const entry: Entry = { url, link: undefined, replica: undefined, channel: undefined, dead: false, dropped: new AbortController() };
    this.#entries.set(actor, entry);
    const fail = () => {
      if (entry.dead) return;
      entry.dead = true;
      // Waiting calls go to another replica, or, with none left, back through the head.
      this.queue.pump();
    };
    const connecting = async () => {
      const { host, port, tls } = endpointOf(url);
      // A client that reached the head over TLS sends no byte in clear: its runs go through the head instead.
      if (this.#tls && !tls) throw new Error(`replica ${url} takes calls in clear, and this client reached the head over TLS`);
      // Replies are handed to callers, who may keep them: their frames are not pooled.
      const stream = await FrameStream.connect(host, port, {
        maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
        pooled: false,
        timeoutMs: CONNECT_TIMEOUT_MS,
        signal: entry.dropped.signal,
        ...(tls ? { tls: this.#tls ?? {} } : {}),
      });
      const channel: ReplicaChannel = new Channel<Nothing, ClientToReplica, typeof ClientToReplicaReplies>(stream, {
        schema: NothingSchema,
        replies: ClientToReplicaReplies,
        onMessage: () => {},
        onClose: fail,
      });
      entry.channel = channel;
      await channel.request({ type: 'hello', token }, CONNECT_TIMEOUT_MS);
      if (entry.dropped.signal.aborted || entry.dead) return;
      const link = new ReplicaLink<Nothing, ClientToReplica>(channel);
      entry.link = link;
      entry.replica = this.#sharedMemory ? new SharedMemoryReplica(link, channel, this.#sharedMemory) : link;
      this.queue.pump();
    };
    connecting().catch(() => {
      entry.channel?.terminate();
      fail();
    });
  }

  /** Closes the replica's socket at once, whatever state it is in. */
  #drop(entry: Entry): void {
    entry.dropped.abort();
    entry.channel?.terminate();
  }

  /** A replica that left the routes gets no new calls; its socket closes once it has answered the rest. */
  #retire(entry: Entry): void {
    const link = entry.link;
    if (!link || entry.dead) {
      this.#drop(entry);
      return;
    }
    entry.dead = true;
    void link.whenIdle(LEAVE_GRACE_MS).then(() => {
      if (link.inFlight === 0) link.close('replica left the routes');
      else link.terminate(`it left the routes and did not answer within ${LEAVE_GRACE_MS / 1000} s`);
    });
  }
}
