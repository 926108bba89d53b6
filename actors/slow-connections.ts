import type { Socket } from 'node:net';

/** A request whose body has been coming this long is slow: the head hears of it, and may have its connection closed for room. */
export const SLOW_AFTER_MS = 1000;

export interface SlowReport {
  count: number;
  /** When the oldest slow one began (ms since the epoch). */
  oldest?: number;
}

/**
 * The handed-over connections of a replica whose request is still coming (a body begun and not
 * whole), oldest first: the ones the head's --max-connections may close for room, as it closes a
 * front-door worker's (head/front-door/connection-cap.ts). The head hears only of those slow for
 * SLOW_AFTER_MS or more, and only when that changes, so a request that arrives at once costs no
 * message: a body dripped a byte at a time into a replica had held its place for good.
 */
export class SlowConnections {
  readonly #since = new Map<Socket, number>();
  /** Connections whose close is listened for already: one listener each, however many requests they carry. */
  readonly #watched = new WeakSet<Socket>();
  readonly #tell: (report: SlowReport) => void;
  #told: SlowReport = { count: 0 };
  #check: NodeJS.Timeout | undefined;

  constructor(tell: (report: SlowReport) => void) {
    this.#tell = tell;
  }

  /** A request began sending its body on `socket`. */
  bodyStarted(socket: Socket): void {
    if (socket.destroyed || this.#since.has(socket)) return;
    this.#since.set(socket, Date.now());
    if (!this.#watched.has(socket)) {
      this.#watched.add(socket);
      socket.once('close', () => this.requestComplete(socket));
    }
    this.#checkLater(SLOW_AFTER_MS);
  }

  /** The request on `socket` is whole (or the connection closed). */
  requestComplete(socket: Socket): void {
    if (this.#since.delete(socket)) this.#report();
  }

  /** Closes the oldest slow connection (the head is at its cap); false if there is none. */
  evictOldest(): boolean {
    const [oldest] = this.#since.keys();
    if (!oldest) return false;
    this.#since.delete(oldest);
    oldest.destroy();
    this.#report();
    return true;
  }

  #report(): void {
    const now = Date.now();
    let count = 0;
    let oldest: number | undefined;
    let youngest = Infinity;
    for (const since of this.#since.values()) {
      if (now - since >= SLOW_AFTER_MS) {
        count++;
        oldest ??= since;
      } else youngest = Math.min(youngest, since);
    }
    if (youngest !== Infinity) this.#checkLater(youngest + SLOW_AFTER_MS - now);
    if (count === this.#told.count && oldest === this.#told.oldest) return;
    this.#told = oldest === undefined ? { count } : { count, oldest };
    this.#tell(this.#told);
  }

  #checkLater(ms: number): void {
    if (this.#check) return;
    this.#check = setTimeout(
      () => {
        this.#check = undefined;
        this.#report();
      },
      Math.max(0, ms),
    );
    this.#check.unref();
  }
}
