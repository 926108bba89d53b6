import type { Socket } from 'node:net';

/**
 * The head's `--max-connections`, over every connection it serves: its HTTP port and its gRPC
 * port, and those it handed to front-door workers (as they last reported them). Node's own
 * `maxConnections` counted only the HTTP sockets still in the head process, so 1,200 idle HTTP/2
 * connections (handed to workers) were held against a cap of 1,000.
 *
 * At the cap, a new connection takes the place of the oldest HTTP connection here that has not yet
 * sent a whole request head (a slow or silent one), instead of being refused: 1,500 slowloris
 * sockets against a cap of 1,000 had left /healthz unanswered in 498 of 513 polls.
 */
export class ConnectionCap {
  readonly #max: number;
  /** Connections open in this process. */
  #here = 0;
  /** HTTP connections here that have sent no whole request head yet, oldest first. */
  readonly #unproven = new Set<Socket>();
  /** Connections the front-door workers hold. */
  #elsewhere: () => number = () => 0;

  constructor(max: number) {
    this.#max = max;
  }

  /** Where the count of the workers' connections comes from. */
  countElsewhere(count: () => number): void {
    this.#elsewhere = count;
  }

  get open(): number {
    return this.#here + this.#elsewhere();
  }

  /**
   * Takes a new connection (true), making room by dropping the oldest unproven HTTP one at the cap,
   * or refuses it (false: the caller closes it). `http`: it may be dropped later to make room.
   */
  admit(socket: Socket, http: boolean): boolean {
    if (this.open >= this.#max) {
      const oldest = this.#unproven.values().next().value as Socket | undefined;
      if (!oldest) return false;
      this.#unproven.delete(oldest);
      oldest.destroy();
    }
    this.#here++;
    if (http) this.#unproven.add(socket);
    socket.once('close', () => {
      this.#here--;
      this.#unproven.delete(socket);
    });
    return true;
  }

  /** The connection sent a whole request head (or went to a worker): it is no longer dropped to make room. */
  proven(socket: Socket): void {
    this.#unproven.delete(socket);
  }
}
