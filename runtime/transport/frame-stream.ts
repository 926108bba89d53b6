import { connect as connectSocket } from 'node:net';
import type { Socket } from 'node:net';
import { TLSSocket, connect as connectTls } from 'node:tls';
import type { ConnectionOptions } from 'node:tls';
import type { TroupeError } from '../errors.js';
import { moveHandle } from '../node-internals.js';
import { sharedBufferPool } from './buffer-pool.js';
import { FrameReader, LENGTH_PREFIX_BYTES } from './frame-reader.js';
import type { FrameSink, FrameTransport } from './frame-transport.js';

/** Close codes reported to the channel, as a WebSocket would report them. */
const NORMAL_CLOSE = 1000;
const ABNORMAL_CLOSE = 1006;
/** How long a closed stream waits for its peer to close too before dropping the socket. */
const CLOSE_TIMEOUT_MS = 5000;

export interface FrameStreamOptions {
  maxFrameBytes: number;
  /**
   * Frames from the process's shared pool, released back by whoever consumes them (an actor's
   * calls). Off for frames whose bytes are handed on to users (a client's replies): those are
   * exact allocations a user may keep.
   */
  pooled: boolean;
}

/** Node's `onread` socket option, pointed at `reader`: each read lands where the reader says. */
function readInPlace(reader: FrameReader): { buffer: () => Uint8Array; callback: (n: number, buffer: Uint8Array) => boolean } {
  return {
    buffer: () => reader.nextBuffer(),
    callback: (n, buffer) => {
      reader.read(n, buffer);
      return true;
    },
  };
}

/**
 * Frames over a TCP socket, each preceded by its length (big-endian u32): the transport of direct
 * calls between SDK clients and replicas. A WebSocket delivers a message only after gathering
 * its 64 KB reads into one buffer and, for a fragmented message, its fragments into another;
 * here a frame's bytes are read into their final buffer by the kernel (see frame-reader.ts), at a
 * tenth of the receiver's CPU per image (bench/RESULTS-hops.md).
 */
export class FrameStream implements FrameTransport {
  readonly #socket: Socket;
  readonly #reader: FrameReader;
  /** Whether reads land in frame buffers directly (false: Node's chunks are copied in). */
  readonly readsInPlace: boolean;
  #sink: FrameSink | undefined;
  #early: [Buffer, (() => void) | undefined][] = [];
  #broken: TroupeError | undefined;
  #closeCode: number | undefined;
  #closeReason = '';

  private constructor(socket: Socket, reader: FrameReader, readsInPlace: boolean) {
    this.#socket = socket;
    this.#reader = reader;
    this.readsInPlace = readsInPlace;
    reader.handlers = { onFrame: (frame, release) => this.#deliver(frame, release), onError: (error) => this.fail(error) };
    socket.setNoDelay(true);
    // 'error' is always followed by 'close', which reports it.
    socket.on('error', () => {});
    socket.on('close', (hadError) => {
      const code = this.#closeCode ?? (hadError || this.#broken ? ABNORMAL_CLOSE : NORMAL_CLOSE);
      this.#sink?.closed(code, this.#closeReason || (this.#broken?.message ?? ''));
    });
  }

  /**
   * Connects to `host:port`; resolves once connected. Rejects with the socket's error (refused,
   * unreachable, aborted by `signal`) or when `timeoutMs` passes first.
   */
  static connect(
    host: string,
    port: number,
    options: FrameStreamOptions & { timeoutMs: number; signal?: AbortSignal; tls?: ConnectionOptions },
  ): Promise<FrameStream> {
    const reader = FrameStream.#newReader(options);
    if (options.tls) return FrameStream.#connectTls(host, port, reader, options);
    const socket = connectSocket({
      host,
      port,
      onread: readInPlace(reader),
      noDelay: true,
      keepAlive: true,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const stream = new FrameStream(socket, reader, true);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no connection to ${host}:${port} within ${options.timeoutMs} ms`));
      }, options.timeoutMs);
      socket.once('connect', () => (clearTimeout(timer), resolve(stream)));
      socket.once('error', (err) => (clearTimeout(timer), reject(err)));
    });
  }

  /**
   * Takes over a socket that a `net.Server` created with `pauseOnConnect: true` accepted (so it
   * has read nothing yet), or one just upgraded from HTTP (`leftover`: the bytes its parser read
   * past the headers). Node offers `onread`, the option that reads in place, only to sockets
   * it connects itself; an accepted socket's handle is moved to a socket made with it, as Node
   * does when it accepts (runtime/node-internals.ts). Where it cannot be, Node's chunks are copied in.
   */
  static adopt(accepted: Socket, options: FrameStreamOptions, leftover?: Uint8Array): FrameStream {
    const reader = FrameStream.#newReader(options);
    // A TLS socket's handle is OpenSSL's, not the connection's: it cannot be moved, and its reads are decrypted copies anyway.
    const socket =
      accepted instanceof TLSSocket ? undefined : moveHandle(accepted, { onread: readInPlace(reader), readable: true, writable: true });
    if (!socket) {
      const stream = new FrameStream(accepted, reader, false);
      if (leftover?.length) reader.consume(leftover);
      accepted.on('data', (chunk: Buffer) => reader.consume(chunk));
      accepted.resume();
      return stream;
    }
    socket.setKeepAlive(true);
    const stream = new FrameStream(socket, reader, true);
    // Bytes read before the hand-over come first; the new socket's first read is still to come.
    if (leftover?.length) reader.consume(leftover);
    return stream;
  }

  /**
   * Over TLS: resolves once the handshake verified the server, so nothing is sent before it.
   * OpenSSL decrypts into buffers of its own, so Node's chunks are copied in (no `onread`).
   */
  static #connectTls(
    host: string,
    port: number,
    reader: FrameReader,
    options: { timeoutMs: number; signal?: AbortSignal; tls?: ConnectionOptions },
  ): Promise<FrameStream> {
    const socket = connectTls({ ...options.tls, host, port });
    socket.setKeepAlive(true);
    const stream = new FrameStream(socket, reader, false);
    socket.on('data', (chunk: Buffer) => reader.consume(chunk));
    return new Promise((resolve, reject) => {
      const abort = () => socket.destroy(new Error('aborted'));
      options.signal?.addEventListener('abort', abort, { once: true });
      if (options.signal?.aborted) abort();
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no TLS connection to ${host}:${port} within ${options.timeoutMs} ms`));
      }, options.timeoutMs);
      const settled = () => (clearTimeout(timer), options.signal?.removeEventListener('abort', abort));
      socket.once('secureConnect', () => (settled(), resolve(stream)));
      socket.once('error', (err) => (settled(), reject(err)));
    });
  }

  static #newReader(options: FrameStreamOptions): FrameReader {
    return new FrameReader(options.maxFrameBytes, options.pooled ? sharedBufferPool : undefined);
  }

  /** Raises (or lowers) the largest frame accepted from now on, e.g. once a peer authenticated. */
  set maxFrameBytes(bytes: number) {
    this.#reader.maxFrameBytes = bytes;
  }

  start(sink: FrameSink): void {
    this.#sink = sink;
    for (const [frame, release] of this.#early.splice(0)) sink.frame(frame, release);
  }

  send(parts: readonly Uint8Array[]): void {
    if (this.#socket.destroyed) return;
    let length = 0;
    for (const p of parts) length += p.byteLength;
    const prefix = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES);
    prefix.writeUInt32BE(length, 0);
    // One writev for the whole frame; the parts themselves are never copied here.
    this.#socket.cork();
    this.#socket.write(prefix);
    for (const p of parts) this.#socket.write(p);
    this.#socket.uncork();
  }

  close(code: number, reason: string): void {
    this.#closeCode ??= code;
    this.#closeReason ||= reason;
    // What is queued is sent first; a peer that never closes its side is dropped after a while.
    this.#socket.end();
    setTimeout(() => this.#socket.destroy(), CLOSE_TIMEOUT_MS).unref();
  }

  terminate(): void {
    this.#socket.destroy();
  }

  get bufferedBytes(): number {
    return this.#socket.writableLength;
  }

  /** The framing broke: the peer hears why, then the connection ends (nothing after it is a frame). */
  fail(error: TroupeError): void {
    this.#broken = error;
    this.#sink?.refused(error);
    // The channel sends its answer at the end of this microtask checkpoint: close after it.
    queueMicrotask(() => this.close(ABNORMAL_CLOSE, error.message));
  }

  #deliver(frame: Buffer, release: (() => void) | undefined): void {
    if (this.#sink) this.#sink.frame(frame, release);
    else this.#early.push([frame, release]);
  }
}
