import type { Socket } from 'node:net';

/**
 * The head's `--max-connections`, over every connection it serves: its HTTP port and its gRPC
 * port, and those it handed to front-door workers (as they last reported them). Node's own
 * `maxConnections` counted only the HTTP sockets still in the head process, so 1,200 idle HTTP/2
 * connections (handed to workers) were held against a cap of 1,000.
 *
 * At the cap, a new connection takes the place of the oldest HTTP connection here that has not yet
 * sent a whole request, head and body (a slow or silent one), instead of being refused: 1,500 slowloris
 * sockets against a cap of 1,000 had left /healthz unanswered in 498 of 513 polls. With none such
 * here, a front-door worker closes its oldest one instead (the slowloris sockets that open with an
 * inference request line are the workers'). Connections the head's accept loop holds before their
 * request head is whole (accept-loop.ts) count too, and are the first to go: they have not yet
 * said what they want.
 */
export class ConnectionCap {
  readonly #max: number;
  /** Connections open in this process. */
  #here = 0;
  /** HTTP connections here that have sent no whole request head yet, oldest first, and when each came. */
  readonly #unproven = new Map<Socket, number>();
  /** Connections the front-door workers hold. */
  #elsewhere: () => number = () => 0;
  /** Asks a front-door worker to close its oldest unproven connection if it came before the time given; false if none did. */
  #evictElsewhere: (before: number) => boolean = () => false;
  /** Connections accepted off the event loop that have not sent a whole request head yet, and how the oldest is closed. */
  #waiting: () => number = () => 0;
  #evictWaiting: () => boolean = () => false;

  constructor(max: number) {
    this.#max = max;
  }

  /** The cap: --max-connections. */
  get max(): number {
    return this.#max;
  }

  /** Where the count of the workers' connections comes from, and how one of their slow ones is dropped. */
  countElsewhere(count: () => number, evict: (before: number) => boolean): void {
    this.#elsewhere = count;
    this.#evictElsewhere = evict;
  }

  /** Where the count of connections still waiting for a whole request head comes from, and how the oldest of them is closed. */
  countWaiting(count: () => number, evictOldest: () => boolean): void {
    this.#waiting = count;
    this.#evictWaiting = evictOldest;
  }

  get open(): number {
    return this.#here + this.#elsewhere() + this.#waiting();
  }

  /** Of `open`, the connections accepted that have not sent a whole request head yet (accept-loop.ts). */
  get waiting(): number {
    return this.#waiting();
  }

  /**
   * Takes a new connection (true), making room at the cap (`room`), or refuses it (false: the
   * caller closes it). `http`: it may be dropped later to make room.
   */
  admit(socket: Socket, http: boolean): boolean {
    if (!this.room()) return false;
    this.count(socket, http);
    return true;
  }

  /** Counts `socket` here until it closes, room having been made for it (`room`). */
  count(socket: Socket, http: boolean): void {
    this.#here++;
    if (http) this.#unproven.set(socket, Date.now());
    socket.once('close', () => {
      this.#here--;
      this.#unproven.delete(socket);
    });
  }

  /**
   * Whether a new connection fits, making room at the cap: the oldest connection still waiting for
   * its request head goes, else the oldest unproven HTTP one (here, else a worker's or a
   * replica's). A connection handed on at once (accept-loop.ts) asks this and is then counted
   * where it went.
   */
  room(): boolean {
    if (this.open < this.#max || this.#evictWaiting()) return true;
    // The oldest slow one goes, here or in a worker: a client's new connection here (unproven
    // for the moment its request takes to arrive) is not dropped for a slowloris socket's sake.
    const oldest = this.#unproven.entries().next().value as [Socket, number] | undefined;
    if (this.#evictElsewhere(oldest?.[1] ?? Infinity)) return true;
    if (!oldest) return false;
    this.#unproven.delete(oldest[0]);
    oldest[0].destroy();
    return true;
  }

  /** The connection sent a whole request (or went to a worker): it is no longer dropped to make room. */
  proven(socket: Socket): void {
    this.#unproven.delete(socket);
  }

  /**
   * The connection began a request body: it may be dropped to make room again (as of now, unless
   * it still was) until the body is whole. A body sent a byte at a time after a whole head had held
   * its place for good while only heads counted.
   */
  slow(socket: Socket): void {
    if (!socket.destroyed && !this.#unproven.has(socket)) this.#unproven.set(socket, Date.now());
  }
}
