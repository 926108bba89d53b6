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
 * inference request line are the workers').
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

  constructor(max: number) {
    this.#max = max;
  }

  /** Where the count of the workers' connections comes from, and how one of their slow ones is dropped. */
  countElsewhere(count: () => number, evict: (before: number) => boolean): void {
    this.#elsewhere = count;
    this.#evictElsewhere = evict;
  }

  get open(): number {
    return this.#here + this.#elsewhere();
  }

  /**
   * Takes a new connection (true), making room by dropping the oldest unproven HTTP one at the cap
   * (here, else a worker's), or refuses it (false: the caller closes it). `http`: it may be dropped later to make room.
   */
  admit(socket: Socket, http: boolean): boolean {
    if (this.open >= this.#max) {
      // The oldest slow one goes, here or in a worker: a client's new connection here (unproven
      // for the moment its request takes to arrive) is not dropped for a slowloris socket's sake.
      const oldest = this.#unproven.entries().next().value as [Socket, number] | undefined;
      if (!this.#evictElsewhere(oldest?.[1] ?? Infinity)) {
        if (!oldest) return false;
        this.#unproven.delete(oldest[0]);
        oldest[0].destroy();
      }
    }
    this.#here++;
    if (http) this.#unproven.set(socket, Date.now());
    socket.once('close', () => {
      this.#here--;
      this.#unproven.delete(socket);
    });
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
