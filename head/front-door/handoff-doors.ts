import type { Socket } from 'node:net';
import { descriptorOf, handoffAddon, socketOverDescriptor } from '../../runtime/internal.js';
import type { ActorToHead, Channel, ClassLabels, HandoffAddon, HeadToActor, HeadToActorReplies, Logger } from '../../runtime/internal.js';
import type { ActorRecord } from '../state/records.js';
import type { HttpServing } from '../state/deployment-layout.js';

type ActorChannel = Channel<ActorToHead, HeadToActor, typeof HeadToActorReplies>;

const HEAD_END = Buffer.from('\r\n\r\n');

/** What an actor is told when its door opens: how to serve the connections handed to it. */
export type DoorSettings = Omit<Extract<HeadToActor, { type: 'handoffOpen' }>, 'type' | 'id' | 'headPid' | 'labels'>;

/** The deployment an inference request names in its request line (`POST /v2/models/NAME[/versions/V]/infer`). */
const INFER_LINE = /^POST \/v2\/models\/([^/? ]+)(?:\/versions\/[^/? ]+)?\/infer[ ?]/;

interface Door {
  actor: ActorRecord;
  channel: ActorChannel;
  /** This process's end of the actor's handoff socket. */
  fd: number;
  /** Connections handed to the actor and not closed yet, as far as the head knows. */
  connections: number;
  /**
   * Connections ever handed to it: among doors holding as many open, the one handed fewest goes
   * next. Clients that open a connection per request close each before the next, so every door
   * held none and the first one listed took them all.
   */
  handed: number;
  /** Of those, the ones whose request has been coming for a while, and since when the oldest (the actor's last report). */
  slow: number;
  oldestSlow?: number;
}

/**
 * When connections are handed over. `always` (`--http-handoff`): to a READY replica with a door,
 * whatever the deployment. `auto` (the default): while the model has one READY replica, and it
 * has a door, or while its replicas were chosen at load (one per core for a costly model,
 * head/control/replicas-at-load.ts). Balancing by connection cannot unbalance a lone replica, and
 * its crash fails the calls in it whichever process holds the client's connection (there is no
 * other replica to retry on). Replicas chosen at load are the layout that layout is chosen for:
 * an HTTP/1.1 connection carries one request at a time, so connections spread by count keep each
 * replica's core busy, and a crash resets the connections of that replica (its clients' next
 * connections go to the others), the cost docs/front-door.md weighs. Other deployments of several
 * replicas go through the front-door workers, which balance request by request and retry a dead
 * replica's calls on another (docs/front-door.md#replicas-serving-http).
 */
export type HandoffMode = 'auto' | 'always';

export interface HandoffDoorsOptions {
  mode: HandoffMode;
  /** READY replicas of a deployment, wherever they run (a door is only on the head's host). */
  readyReplicas: (deployment: string) => number;
  /** Whether the head chose the deployment's replica count at load (head/control/replicas-at-load.ts). */
  chosenAtLoad: (deployment: string) => boolean;
  /** The settings actors serve with; asked when a door opens (the relay port is known once the workers started). */
  settings: () => DoorSettings;
  /** A deployment's class labels, passed to its replicas for the classification extension. */
  labels: (deployment: string) => ClassLabels | undefined;
  /** Serves a connection an actor gave back in the head, after `head`, the bytes it read of it. */
  serveHere: (socket: Socket, head: Buffer) => void;
  /** Counts a connection handed to `actor`, a replica of `deployment`. */
  handedOver: (deployment: string, actor: string) => void;
  log: Logger;
}

/**
 * Replicas on this host that serve HTTP themselves (actors/http-door.ts). A connection whose first
 * request is an inference of a deployment with such a replica is handed to the replica holding the
 * fewest connections, as a file descriptor (runtime/handoff/): the replica then parses, runs and
 * answers each request on it in its own process, so a request costs no front-door worker and no
 * hop between processes. Balancing is by connection, as a TCP load balancer's is; a client that
 * sends everything on one connection reaches one replica. Connections of deployments without such
 * replicas (another host, no addon) go to the front-door workers as before.
 */
export class HandoffDoors {
  readonly #addon: HandoffAddon;
  readonly #options: HandoffDoorsOptions;
  readonly #byActor = new Map<string, Door>();
  #draining = false;

  private constructor(addon: HandoffAddon, options: HandoffDoorsOptions) {
    this.#addon = addon;
    this.#options = options;
  }

  /** The doors, or undefined (logged) when this head cannot pass connections on (no addon). */
  static create(options: HandoffDoorsOptions): HandoffDoors | undefined {
    const addon = handoffAddon();
    if (typeof addon === 'string') {
      options.log.info({ why: addon }, 'replicas will not serve HTTP themselves: front-door workers serve every connection');
      return undefined;
    }
    return new HandoffDoors(addon, options);
  }

  /**
   * An actor said `ready` with a handoff address: connect to it and open the door. An address this
   * process cannot reach (the actor runs on another host or in another network namespace) leaves
   * the actor served through the workers.
   */
  offer(actor: ActorRecord, channel: ActorChannel, name: string): void {
    this.#remove(actor.id);
    let fd: number;
    try {
      fd = this.#addon.connect(name);
    } catch (err) {
      this.#options.log.debug({ actor: actor.name, err: (err as Error).message }, 'actor not reachable for handoff (another host?)');
      return;
    }
    const door: Door = { actor, channel, fd, connections: 0, handed: 0, slow: 0 };
    const labels = this.#options.labels(actor.deployment);
    channel.request({ type: 'handoffOpen', headPid: process.pid, ...this.#options.settings(), ...(labels ? { labels } : {}) }, 10_000).then(
      () => {
        if (channel.closed) return this.#addon.close(fd);
        this.#byActor.set(actor.id, door);
        void channel.whenClosed.then(() => this.#remove(actor.id, door));
      },
      (err: unknown) => {
        this.#addon.close(fd);
        this.#options.log.warn({ actor: actor.name, err: (err as Error).message }, 'actor refused the handoff: the workers serve it');
      },
    );
  }

  /** Which process serves `deployment`'s HTTP inference connections now, and why. */
  serving(deployment: string): HttpServing {
    const doors = [...this.#byActor.values()].filter((d) => d.actor.deployment === deployment && d.actor.state === 'READY').length;
    const ready = this.#options.readyReplicas(deployment);
    if (this.#draining) return { byReplica: false, why: 'the head is draining' };
    if (doors === 0)
      return {
        byReplica: false,
        why:
          ready === 0
            ? 'no READY replica yet: the front-door workers take its connections'
            : "no replica with a door open on the head's host (on another host, its door still opening, or its handoff socket failed): the front-door workers serve it",
      };
    if (this.#options.mode === 'always')
      return {
        byReplica: true,
        why: `--http-handoff: ${doors} replica${doors === 1 ? '' : 's'} serve HTTP themselves, balanced by connection`,
      };
    if (ready > 1 && this.#options.chosenAtLoad(deployment))
      return {
        byReplica: true,
        why: `its ${ready} replicas were chosen at load, one per core: each serves the HTTP connections handed to it, balanced by connection (a replica that crashes resets the connections it holds; clients reconnect to the others)`,
      };
    if (ready === 1)
      return {
        byReplica: true,
        why: 'its one replica serves its HTTP connections itself, handed over by the head (with one replica, balancing by connection balances nothing away)',
      };
    return {
      byReplica: false,
      why: `${ready} replicas: the front-door workers balance its requests one by one and retry a lost replica's calls on another (a replica serves HTTP itself only while it is its model's only one; --http-handoff hands connections to several)`,
    };
  }

  /** Hands `socket` (`head`: the bytes read of it) to a READY replica of the deployment its first request names; false when none can take it. */
  take(socket: Socket, head: Buffer): boolean {
    const door = this.#choose(head.toString('latin1', 0, Math.min(head.length, 512)), head.indexOf(HEAD_END) >= 0);
    const fd = door ? descriptorOf(socket) : undefined;
    if (!door || fd === undefined || !this.#hand(door, fd, head)) return false;
    // This process's descriptor closes; the connection lives on in the actor's.
    socket.destroy();
    return true;
  }

  /**
   * Hands a connection the head's accept loop took (`fd`: nothing read of it; `line`: its first
   * bytes, `whole`: whether they hold its whole request head) as `take` hands a socket, closing
   * this process's descriptor once it went.
   */
  takeDescriptor(fd: number, line: string, whole: boolean): boolean {
    const door = this.#choose(line, whole);
    if (!door || !this.#hand(door, fd, Buffer.alloc(0))) return false;
    this.#addon.close(fd);
    return true;
  }

  /** The READY replica, holding the fewest connections, of the deployment the request line names, if one can take it. */
  #choose(line: string, whole: boolean): Door | undefined {
    if (this.#draining || this.#byActor.size === 0) return undefined;
    const match = INFER_LINE.exec(line);
    // Only a whole request head goes to a replica: one still coming stays with the workers, whose
    // connections the head's cap can drop for room (connection-cap.ts); a replica's it cannot.
    if (!match || !whole) return undefined;
    let name: string;
    try {
      name = decodeURIComponent(match[1]!);
    } catch {
      return undefined;
    }
    if (this.#options.mode === 'auto' && this.#options.readyReplicas(name) !== 1 && !this.#options.chosenAtLoad(name)) return undefined;
    let best: Door | undefined;
    for (const door of this.#byActor.values()) {
      if (door.actor.deployment !== name || door.actor.state !== 'READY') continue;
      if (!best || door.connections < best.connections || (door.connections === best.connections && door.handed < best.handed)) best = door;
    }
    return best;
  }

  /** Queues `fd` on the door's handoff socket and tells its actor; false when it cannot go now. */
  #hand(door: Door, fd: number, head: Buffer): boolean {
    let sent: boolean;
    try {
      sent = this.#addon.send(door.fd, fd);
    } catch (err) {
      this.#options.log.warn(
        { actor: door.actor.name, err: (err as Error).message },
        'handoff socket failed: the workers serve this replica',
      );
      this.#remove(door.actor.id, door);
      return false;
    }
    if (!sent) return false;
    door.channel.send({ type: 'connection', head });
    door.connections++;
    door.handed++;
    this.#options.handedOver(door.actor.deployment, door.actor.name);
    return true;
  }

  /** An actor gave a connection back (queued on its handoff socket): serve it here. */
  connectionBack(actorId: string, head: Uint8Array): void {
    const door = this.#byActor.get(actorId);
    if (!door) return;
    let fd = -1;
    try {
      fd = this.#addon.receive(door.fd);
    } catch (err) {
      this.#options.log.warn({ actor: door.actor.name, err: (err as Error).message }, 'cannot take back a connection');
    }
    if (fd < 0) return;
    this.#options.serveHere(socketOverDescriptor(fd), Buffer.from(head));
  }

  /** Connections handed to replicas and still open there: the head's --max-connections counts them. */
  get connections(): number {
    let open = 0;
    for (const door of this.#byActor.values()) open += door.connections;
    return open;
  }

  /** An actor said which of its connections are slow (actors/slow-connections.ts). */
  slowConnections(actorId: string, count: number, oldest: number | undefined): void {
    const door = this.#byActor.get(actorId);
    if (!door) return;
    door.slow = count;
    door.oldestSlow = oldest;
  }

  /**
   * Asks the replica holding the oldest slow connection, if it began before `before` (ms since the
   * epoch), to close it, making room under the head's cap; false if no replica holds one that old.
   * Its count is taken down at once, as a front-door worker's is (front-door.ts evictSlow).
   */
  evictSlow(before: number): boolean {
    let oldest: Door | undefined;
    for (const door of this.#byActor.values())
      if (door.slow > 0 && door.oldestSlow !== undefined && door.oldestSlow < before && (!oldest || door.oldestSlow < oldest.oldestSlow!))
        oldest = door;
    if (!oldest) return false;
    if (--oldest.slow === 0) oldest.oldestSlow = undefined;
    oldest.channel.send({ type: 'evictSlow' });
    return true;
  }

  connectionClosed(actorId: string): void {
    const door = this.#byActor.get(actorId);
    if (door && door.connections > 0) door.connections--;
  }

  /** No more connections are handed over (those handed already stay with their actors). */
  drain(): void {
    this.#draining = true;
  }

  close(): void {
    this.#draining = true;
    for (const door of this.#byActor.values()) this.#addon.close(door.fd);
    this.#byActor.clear();
  }

  #remove(actorId: string, only?: Door): void {
    const door = this.#byActor.get(actorId);
    if (!door || (only && door !== only)) return;
    this.#byActor.delete(actorId);
    this.#addon.close(door.fd);
  }
}

/** Why no replica serves HTTP itself where the head makes no handoff doors: what describe() and the status page say. */
export function whyNoHandoff(httpWorkers: number, httpHandoff: boolean | undefined): string {
  if (httpWorkers === 0) return '--http-workers 0: the head serves HTTP itself';
  return httpHandoff === false
    ? 'handoff turned off (--no-http-handoff): the front-door workers serve HTTP'
    : 'this head cannot pass connections on (no handoff addon): the front-door workers serve HTTP';
}
