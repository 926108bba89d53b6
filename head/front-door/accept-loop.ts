import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { acceptAddon, listenerDescriptor, socketOverDescriptor } from '../../runtime/internal.js';
import type { AcceptAddon, AcceptorHandle } from '../../runtime/internal.js';
import type { ConnectionCap } from './connection-cap.js';
import { FRONT_DOOR_REQUEST } from './connection-split.js';

export interface AcceptLoopOptions {
  host: string;
  port: number;
  backlog: number;
  /** At most this many connections wait for their request head; a new one past that closes the oldest. */
  capacity: number;
  /** A connection without a whole request head this long after its accept is closed. */
  headTimeoutMs: number;
  /** A connection whose request head came, or that cannot be waited on further (native/troupe-accept.c). */
  arrived: (fd: number, line: string, whole: boolean) => void;
}

/**
 * The head's HTTP port, accepted off its event loop (native/troupe-accept.c): a thread accepts
 * each connection and waits for its request head, reading it only with MSG_PEEK, and the event
 * loop meets the connection once the head is whole, as a descriptor with its first line. A burst
 * of slow or silent connections (slowloris) then costs the event loop nothing: it had accepted,
 * wrapped and read each one, and a health check that came behind them waited for all of that.
 * The bytes stay in the kernel, so a connection handed to a worker or a replica goes with nothing
 * read of it.
 */
export class AcceptLoop {
  readonly #addon: AcceptAddon;
  readonly #handle: AcceptorHandle;
  readonly port: number;
  #closed = false;

  private constructor(addon: AcceptAddon, handle: AcceptorHandle, port: number) {
    this.#addon = addon;
    this.#handle = handle;
    this.port = port;
  }

  /**
   * Listens as Node would (same addresses, same errors: a port in use throws), then hands the
   * listening socket to the addon's thread. A string says why the event loop accepts instead
   * (no addon, or no descriptor to pass): the port is free again then.
   */
  static async listen(options: AcceptLoopOptions): Promise<AcceptLoop | string> {
    const addon = acceptAddon();
    if (typeof addon === 'string') return addon;
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: options.host, port: options.port, backlog: options.backlog }, () => resolve());
    });
    // Still in the turn that bound it: Node has not polled this socket, so it accepted nothing.
    const fd = listenerDescriptor(server);
    const port = (server.address() as AddressInfo).port;
    let loop: AcceptLoop | string;
    try {
      loop =
        fd === undefined
          ? "Node's listening handle has no file descriptor to pass"
          : new AcceptLoop(addon, addon.start(fd, options.capacity, options.headTimeoutMs, options.arrived), port);
    } catch (err) {
      loop = `the accept thread did not start: ${(err as Error).message}`;
    }
    // The addon accepts on its own duplicate of the socket.
    server.close();
    return loop;
  }

  /** Connections accepted that have not sent a whole request head yet. */
  get waiting(): number {
    return this.#closed ? 0 : this.#addon.waiting(this.#handle);
  }

  /** Closes the connection that has waited longest for its request head; false if none waits. */
  evictOldest(): boolean {
    return !this.#closed && this.#addon.evict(this.#handle);
  }

  /** Stops accepting; closes the listening socket and the connections still waiting. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#addon.stop(this.#handle);
  }

  get closed(): boolean {
    return this.#closed;
  }
}

export interface ArrivalRoutes {
  cap: ConnectionCap;
  /** Hands an inference-protocol connection on (to a replica, else a worker), taking its descriptor; false when none takes it. */
  handOff: (fd: number, line: string, whole: boolean) => boolean;
  /** Serves a socket in the head. */
  serveHere: (socket: Socket) => void;
  /** Whether the head stopped accepting: a connection the thread had queued is closed. */
  closed: () => boolean;
}

/**
 * Where a connection from the accept loop goes, as connection-split.ts decides for a socket: an
 * inference-protocol request to a replica or a worker (with room made under the head's cap),
 * anything else, and what no one takes, to the head's own server.
 */
export function routeArrivals(routes: ArrivalRoutes): (fd: number, line: string, whole: boolean) => void {
  return (fd, line, whole) => {
    // Room is made once, wherever the connection then goes.
    if (routes.closed() || !routes.cap.room()) return void socketOverDescriptor(fd).destroy();
    if (FRONT_DOOR_REQUEST.test(line) && routes.handOff(fd, line, whole)) return;
    const here = socketOverDescriptor(fd);
    routes.cap.count(here, true);
    routes.serveHere(here);
  };
}
