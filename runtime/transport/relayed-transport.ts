import type { FrameSink, FrameTransport } from './frame-transport.js';

/** How a relayed transport reaches the relay that carries its frames. */
export interface RelayEnd {
  /** Sends one whole frame through the relay. */
  send(frame: Uint8Array): void;
  /**
   * Tells the far end this link is closed (the relay then drops it). A promise: the transport
   * ends once it settles, when what was sent before has left (an actor's IPC writes).
   */
  close(code: number, reason: string): void | Promise<void>;
  /** Bytes the relay's own connection holds unsent. */
  bufferedBytes(): number;
}

/**
 * One actor's link to the head carried inside another connection: the node agent's (an actor on a
 * node whose agent relays, see docs/operations.md#actor-links), or the actor's IPC channel to that
 * agent. Frames are the same msgpack frames a frame stream carries, so the Channel over it, and
 * everything above, is the one a direct connection has. The owner pushes what arrives with
 * `deliver` and `ended`; frames that arrive before the channel starts are kept until it does.
 */
export class RelayedTransport implements FrameTransport {
  readonly #relay: RelayEnd;
  #sink: FrameSink | undefined;
  #early: Uint8Array[] = [];
  #ended: { code: number; reason: string } | undefined;
  #closing = false;

  constructor(relay: RelayEnd) {
    this.#relay = relay;
  }

  start(sink: FrameSink): void {
    this.#sink = sink;
    for (const frame of this.#early.splice(0)) sink.frame(asBuffer(frame), undefined);
    if (this.#ended) sink.closed(this.#ended.code, this.#ended.reason);
  }

  send(parts: readonly Uint8Array[]): void {
    if (this.#ended || this.#closing) return;
    // One frame a message: the relay's own connection frames it again, so the parts are joined here.
    this.#relay.send(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  close(code: number, reason: string): void {
    if (this.#ended || this.#closing) return;
    this.#closing = true;
    const closed = this.#relay.close(code, reason);
    if (closed) void closed.then(() => this.ended(code, reason));
    else this.ended(code, reason);
  }

  terminate(): void {
    this.close(1006, 'terminated');
  }

  get bufferedBytes(): number {
    return this.#relay.bufferedBytes();
  }

  /** A frame from the far end. */
  deliver(frame: Uint8Array): void {
    if (this.#ended) return;
    if (this.#sink) this.#sink.frame(asBuffer(frame), undefined);
    else this.#early.push(frame);
  }

  /** The link is gone (the far end closed it, or the connection under it went); reported once. */
  ended(code: number, reason: string): void {
    if (this.#ended) return;
    this.#ended = { code, reason };
    this.#sink?.closed(code, reason);
  }
}

function asBuffer(frame: Uint8Array): Buffer {
  return Buffer.isBuffer(frame) ? frame : Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
}
