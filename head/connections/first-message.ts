/**
 * How long a client or agent connection may stay silent before its first message. A token (or
 * none, on loopback) is all it takes to open one, and each holds a socket, buffers and a channel:
 * without a bound, peers that connect and never speak hold them for as long as they like.
 * The SDK says `hello` at once and an agent `register`s at once, so this only ends silent ones.
 */
export const FIRST_MESSAGE_TIMEOUT_MS = 10_000;

/** How long a peer that was told to go gets to close its side before its socket is dropped. */
const CLOSE_GRACE_MS = 1000;

interface Closable {
  readonly closed: boolean;
  readonly whenClosed: Promise<void>;
  close(code?: number, reason?: string): void;
  terminate(): void;
}

/**
 * Closes a channel (1008, saying why) that has not been `heard` from within `timeoutMs` of being
 * watched. `heard` may come first: a message can arrive while the channel is being made (bytes
 * that came with the upgrade), before there is a channel to watch.
 */
export class FirstMessageBound {
  readonly #timeoutMs: number;
  readonly #onSilent: () => void;
  #heard = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number, onSilent: () => void) {
    this.#timeoutMs = timeoutMs;
    this.#onSilent = onSilent;
  }

  /** Something came from the peer (a message, or a frame that was refused: that is not silence). */
  heard(): void {
    if (this.#heard) return;
    this.#heard = true;
    clearTimeout(this.#timer);
  }

  watch(channel: Closable): void {
    if (this.#heard) return;
    this.#timer = setTimeout(() => {
      if (channel.closed) return;
      this.#onSilent();
      channel.close(1008, `nothing said within ${this.#timeoutMs} ms of connecting`);
      const drop = setTimeout(() => channel.terminate(), CLOSE_GRACE_MS);
      void channel.whenClosed.then(() => clearTimeout(drop));
    }, this.#timeoutMs);
    void channel.whenClosed.then(() => clearTimeout(this.#timer));
  }
}
