import type { WebSocket } from 'ws';
import { TroupeError } from '../errors.js';

/** What a transport reports to the one {@link Channel} reading it. */
export interface FrameSink {
  /**
   * One whole frame. `release`, when given, hands the frame's buffer back for reuse: call it once
   * nothing will read the frame's bytes (or views of them) again; not calling it is always safe.
   */
  frame(bytes: Buffer, release: (() => void) | undefined): void;
  /**
   * Something arrived that is not a frame; the channel answers it. A WebSocket text message leaves
   * the connection up; a stream whose framing broke closes once that answer has gone.
   */
  refused(error: TroupeError): void;
  /** The connection is gone, for whatever reason; called once. */
  closed(code: number, reason: string): void;
}

/**
 * A connection that carries whole frames: a WebSocket (head and agents; actors and SDK clients
 * behind a TLS proxy) or a length-prefixed byte stream (actors and SDK clients to the head, SDK
 * clients calling replicas directly; see frame-stream.ts and frames-upgrade.ts).
 */
export interface FrameTransport {
  /** Starts delivering to `sink`; called once, by the channel that owns the transport. */
  start(sink: FrameSink): void;
  /** Sends one frame made of `parts` in order, never joining them into one buffer. */
  send(parts: readonly Uint8Array[]): void;
  /** Sends what is queued, then closes; `code` and `reason` reach peers that can carry them. */
  close(code: number, reason: string): void;
  /** Drops the connection at once. */
  terminate(): void;
  /** Bytes sent but not yet handed to the kernel: grows while the peer does not read. */
  readonly bufferedBytes: number;
}

/** A WebSocket as a frame transport: one binary message is one frame. */
export class WebSocketTransport implements FrameTransport {
  readonly #ws: WebSocket;

  constructor(ws: WebSocket) {
    this.#ws = ws;
  }

  start(sink: FrameSink): void {
    const ws = this.#ws;
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) sink.frame(data, undefined);
      else sink.refused(new TroupeError('TROUPE_ERR_BAD_FRAME', 'text frames are not accepted; send binary msgpack frames'));
    });
    ws.on('close', (code, reason) => sink.closed(code, reason.toString()));
    // 'error' is always followed by 'close'; handling it keeps it from crashing the process.
    ws.on('error', () => {});
  }

  send(parts: readonly Uint8Array[]): void {
    // Parts go out as fragments of one WebSocket message: tensor bytes are never joined here.
    for (let i = 0; i < parts.length; i++) this.#ws.send(parts[i]!, { binary: true, fin: i === parts.length - 1 });
  }

  close(code: number, reason: string): void {
    this.#ws.close(code, reason);
  }

  terminate(): void {
    this.#ws.terminate();
  }

  get bufferedBytes(): number {
    return this.#ws.bufferedAmount;
  }
}

/**
 * The transport for `socket`: WebSockets are wrapped, anything else is one already. Told apart by
 * shape, not `instanceof WebSocket`, so that this module does not load `ws`: an SDK client reaches
 * the head over a frame stream and loads it only for a WebSocket (open-transport.ts).
 */
export function asFrameTransport(socket: WebSocket | FrameTransport): FrameTransport {
  return 'bufferedBytes' in socket ? socket : new WebSocketTransport(socket);
}
