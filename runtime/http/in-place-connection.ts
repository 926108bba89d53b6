import { STATUS_CODES } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { moveHandle } from '../node-internals.js';
import { HTTPParser } from 'http-parser-js';
import type { HeaderInfo } from 'http-parser-js';
import { sharedBufferPool } from '../transport/buffer-pool.js';
import { bodyTooLarge } from './errors.js';
import { alignmentPad, answerInference, errorAnswer, headerLengthOf, inferRoute, refusal } from './infer-exchange.js';
import type { HttpAnswer, InferExchangeOptions, InferRoute } from './infer-exchange.js';

/** Reads shorter than this go through the scratch buffer; longer ones land in the body itself. */
const SCRATCH_BYTES = 64 * 1024;
/**
 * One scratch buffer for every connection of the process: a read into it is parsed, and whatever
 * must outlive the read copied out, before the read callback returns, so the next read (on any
 * connection) may overwrite it. One per connection kept 64 KB a connection in use, a different
 * page for each read: with 256 connections, 16 MB the reads cycled through the caches.
 */
const scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
const CONTENT_LENGTH = /^\d{1,15}$/;
/** Answers up to this size are copied behind their head and written at once; larger ones are not copied. */
const JOINED_ANSWER_BYTES = 16 * 1024;
/** GETs of the inference protocol (health, server and model metadata) are relayed to the head; the connection stays. */
const RELAYED = /^\/v2(?:\/|$|\?)/;
/** The largest request head (request line and headers) read, as Node's HTTP server allows. */
const MAX_HEAD_BYTES = 16 * 1024;
// The parser counts every byte of an `execute` that ends between requests towards the next head
// (and resets its own limit with each request), so a body read in one go would exceed it; heads
// are measured here instead (MAX_HEAD_BYTES). Only front-door workers and model actors (for
// handed-over connections) load this module, and nothing else in them uses http-parser-js.
HTTPParser.maxHeaderSize = Number.MAX_SAFE_INTEGER;

export interface InPlaceOptions extends InferExchangeOptions {
  keepAliveTimeoutMs: number;
  headersTimeoutMs: number;
  /** The head's answer to a GET of the inference protocol (health, metadata), asked on its internal port. */
  relay(url: string, headers: IncomingHttpHeaders): Promise<HttpAnswer>;
  /** Hands the connection back to the head with the bytes read of a request this worker does not serve. */
  giveBack(socket: Socket, bytes: Buffer): void;
  /** Whether this server serves inference `route` (default: every one); one it does not is given back. */
  serves?(route: InferRoute): boolean;
  /**
   * A request began sending its body on `socket`: the connection is slow (a front-door worker's
   * connection cap may drop it for room) until the request is complete.
   */
  bodyStarted?(socket: Socket): void;
  /** A whole request (head and body) arrived on `socket`: the cap no longer drops it for room. */
  requestComplete?(socket: Socket): void;
}

interface Request {
  route: InferRoute;
  url: string;
  headers: IncomingHttpHeaders;
  keepAlive: boolean;
  /** A body of declared length, read into its final buffer; or the pieces of a chunked one. */
  body: Buffer | null;
  filled: number;
  pieces: Buffer[] | null;
  received: number;
}

/** Node's headers object from the parser's flat [name, value, ...] list. */
function headersOf(raw: readonly string[]): IncomingHttpHeaders {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    headers[name] = name in headers ? `${headers[name]}, ${raw[i + 1]}` : raw[i + 1]!;
  }
  return headers;
}

/**
 * One client connection a front-door worker serves: inference requests whose bodies are read by
 * the kernel straight into the buffer the call is made from (Node's `onread` option, as the frame
 * streams do: runtime/transport/frame-stream.ts), instead of Node's HTTP server, which hands a
 * body over in fresh 64 KB chunks to be joined. Request heads are parsed by http-parser-js, which
 * gives body bytes as views, never copies. Answers leave in request order (pipelining).
 *
 * A GET of the inference protocol's reads (health, metadata) is relayed to the head and its answer
 * passed on. Any other request that is not an inference POST with a plain or chunked body (another
 * route, an upgrade, an odd Transfer-Encoding) sends the connection back to the head, with every
 * byte read of that request, once the answers before it are out: the head then serves it, and
 * what follows on that connection, with Node's own HTTP server.
 */
export function serveInPlace(accepted: Socket, head: Buffer, options: InPlaceOptions): Socket {
  const socket = InPlaceConnection.serve(accepted, head, options);
  if (socket) return socket;
  // Its handle could not be moved to a socket that reads in place (runtime/node-internals.ts): the
  // head's own HTTP server serves the connection instead, from its first byte.
  options.giveBack(accepted, head);
  return accepted;
}

class InPlaceConnection {
  readonly #options: InPlaceOptions;
  readonly #socket: Socket;
  readonly #parser = new HTTPParser(HTTPParser.REQUEST);
  /** The chunk being parsed, its end, and where in it the request now being read began. */
  #chunk: Buffer = scratch;
  #chunkEnd = 0;
  #requestStart = 0;
  /** Copies of the bytes of a request head that spans reads, kept to give back. */
  #headParts: Buffer[] = [];
  #headBytes = 0;
  #request: Request | null = null;
  /** The bytes being parsed were read straight into the current body. */
  #inPlace = false;
  /** Answers chain in request order; `#owed` counts those not yet written. */
  #answers: Promise<void> = Promise.resolve();
  #owed = 0;
  /** No more requests are parsed on this connection; `#paused`: nor read (it is being given back). */
  #stopped = false;
  #paused = false;
  #ending = false;
  /** A request head has begun and is not complete: its time is bounded from its first byte. */
  #inHead = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * Serves `accepted` on a socket that reads in place, made with its handle; returns that socket, or
   * undefined, `accepted` untouched, when the handle could not be moved (runtime/node-internals.ts).
   */
  static serve(accepted: Socket, head: Buffer, options: InPlaceOptions): Socket | undefined {
    // Node asks for the first buffer as it makes the socket, before the connection below exists:
    // the scratch buffer, as #nextBuffer gives with no request begun. Reads come later.
    let connection: InPlaceConnection | undefined;
    const onread = {
      buffer: () => (connection ? connection.#nextBuffer() : scratch),
      callback: (n: number, buffer: Uint8Array) => connection!.#read(n, buffer),
    };
    const socket = moveHandle(accepted, { onread, readable: true, writable: true, allowHalfOpen: true });
    if (socket) connection = new InPlaceConnection(socket, head, options);
    return socket;
  }

  private constructor(socket: Socket, head: Buffer, options: InPlaceOptions) {
    this.#options = options;
    this.#socket = socket;
    this.#socket.setNoDelay(true);
    this.#socket.on('error', () => this.#socket.destroy());
    this.#socket.on('close', () => clearTimeout(this.#timer));
    // A client that half-closes gets the answers it is owed, then the connection ends.
    this.#socket.on('end', () => this.#endAfterAnswers());
    const parser = this.#parser;
    parser[HTTPParser.kOnHeadersComplete] = (info: HeaderInfo) => this.#headersComplete(info);
    parser[HTTPParser.kOnBody] = (chunk: Buffer, offset: number, length: number) => this.#body(chunk, offset, length);
    parser[HTTPParser.kOnMessageComplete] = () => this.#messageComplete();
    this.#parse(head, head.length);
  }

  #nextBuffer(): Uint8Array {
    const r = this.#request;
    if (r?.body && r.body.length - r.filled > SCRATCH_BYTES) return r.body.subarray(r.filled);
    return scratch;
  }

  #read(n: number, buffer: Uint8Array): boolean {
    // After a refusal the rest of what the client sends is read and dropped, so that it reads
    // the answer instead of a reset.
    if (this.#stopped) return !this.#paused;
    if (buffer === scratch) this.#parse(scratch, n);
    else {
      this.#inPlace = true;
      this.#parse(buffer as Buffer, n);
      this.#inPlace = false;
    }
    return !this.#paused;
  }

  #parse(chunk: Buffer, n: number): void {
    // Bytes arrived: the connection is not idle (a head keeps the bound it started with).
    if (!this.#inHead) clearTimeout(this.#timer);
    this.#chunk = chunk;
    this.#chunkEnd = n;
    this.#requestStart = 0;
    const result = this.#parser.execute(chunk, 0, n);
    if (this.#stopped) return;
    if (result instanceof Error)
      return void this.#refuse({ status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: `malformed HTTP request: ${result.message}` });
    // A body being read: a client that stops sending it is dropped as a silent one is (10 s, docs/security.md).
    if (this.#request !== null) return this.#arm(this.#options.headersTimeoutMs);
    // A request head not complete yet: keep its bytes (the scratch buffer is read into again).
    if (this.#requestStart < n) {
      if (!this.#inHead) {
        this.#inHead = true;
        this.#arm(this.#options.headersTimeoutMs);
      }
      this.#headBytes += n - this.#requestStart;
      if (this.#headBytes > MAX_HEAD_BYTES)
        return void this.#refuse({
          status: 431,
          code: 'TROUPE_ERR_BAD_REQUEST',
          message: `the request head is larger than ${MAX_HEAD_BYTES} bytes`,
        });
      this.#headParts.push(Buffer.from(chunk.subarray(this.#requestStart, n)));
    }
  }

  /** 1 tells the parser there is no body to read. */
  #headersComplete(info: HeaderInfo): 0 | 1 {
    if (this.#stopped) return 1;
    this.#inHead = false;
    clearTimeout(this.#timer);
    const headers = headersOf(info.headers);
    const method = HTTPParser.methods[info.method];
    const route = inferRoute(method, info.url);
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    const chunked = te?.toLowerCase() === 'chunked' && cl === undefined;
    const sized = te === undefined && (cl === undefined || CONTENT_LENGTH.test(cl));
    if (method === 'GET' && RELAYED.test(info.url) && !info.upgrade && te === undefined && (cl === undefined || cl === '0')) {
      this.#headParts = [];
      this.#headBytes = 0;
      this.#answer(this.#options.relay(info.url, headers), info.shouldKeepAlive);
      return 1;
    }
    if (!route || info.upgrade || !(chunked || sized) || this.#options.serves?.(route) === false) {
      this.#giveBack();
      return 1;
    }
    const refused = refusal(this.#options, route, info.url, headers);
    if (refused) return this.#refuse(refused);
    const length = Number(cl ?? 0);
    if (length > this.#options.maxBodyBytes) return this.#refuse(bodyTooLarge(this.#options.maxBodyBytes));
    if (headers.expect?.toLowerCase() === '100-continue') this.#socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    const body = chunked
      ? null
      : length === 0
        ? Buffer.alloc(0)
        : sharedBufferPool.take(alignmentPad(headerLengthOf(headers)) + length).subarray(alignmentPad(headerLengthOf(headers)));
    this.#request = {
      route,
      url: info.url,
      headers,
      // The parser's verdict, `Connection: close` included: forcing keep-alive on a body-less
      // HTTP/1.1 request held open a connection its client had asked to close.
      keepAlive: info.shouldKeepAlive,
      body,
      filled: 0,
      pieces: chunked ? [] : null,
      received: 0,
    };
    this.#headParts = [];
    this.#headBytes = 0;
    if (chunked || length > 0) this.#options.bodyStarted?.(this.#socket);
    // No declared length and not chunked: an empty body (parsing on would read to the end of the stream).
    return cl === undefined && !chunked ? 1 : 0;
  }

  #body(chunk: Buffer, offset: number, length: number): void {
    const r = this.#request;
    if (!r || this.#stopped) return;
    if (r.body) {
      if (!this.#inPlace) chunk.copy(r.body, r.filled, offset, offset + length);
      r.filled += length;
      return;
    }
    r.received += length;
    if (r.received > this.#options.maxBodyBytes) {
      this.#refuse(bodyTooLarge(this.#options.maxBodyBytes));
      return;
    }
    r.pieces!.push(Buffer.from(chunk.subarray(offset, offset + length)));
  }

  #messageComplete(): void {
    const r = this.#request;
    this.#request = null;
    this.#headParts = [];
    this.#headBytes = 0;
    this.#requestStart = (this.#parser as unknown as { offset: number }).offset;
    if (this.#stopped) return;
    this.#options.requestComplete?.(this.#socket);
    if (!r) return;
    const body = r.body ? { bytes: r.body, pooled: r.body.length > 0 } : { bytes: Buffer.concat(r.pieces!), pooled: false };
    const leave = this.#options.gate.enter();
    this.#answer(answerInference(this.#options, r.route, { url: r.url, headers: r.headers }, body).finally(leave), r.keepAlive);
  }

  /** Answers at once and closes after; the rest of the request is not parsed. */
  #refuse(error: Parameters<typeof errorAnswer>[0]): 1 {
    this.#stopped = true;
    this.#answer(Promise.resolve(errorAnswer(error)), false);
    // A client that keeps sending after the answer is dropped in the end.
    this.#arm(this.#options.headersTimeoutMs);
    return 1;
  }

  #answer(answer: Promise<HttpAnswer>, keepAlive: boolean): void {
    this.#owed++;
    this.#answers = this.#answers
      .then(() => answer)
      .then((a) => {
        this.#owed--;
        this.#write(a, keepAlive);
      });
  }

  #write(answer: HttpAnswer, keepAlive: boolean): void {
    const socket = this.#socket;
    if (socket.destroyed || socket.writableEnded) return;
    // A refusal ends the connection, but only once the answers owed before it (and it) are out.
    const close = !keepAlive || (this.#stopped && !this.#paused && this.#owed === 0) || answer.headers.connection === 'close';
    let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n`;
    for (const [name, value] of Object.entries(answer.headers))
      if (name !== 'connection' && name !== 'content-length') head += `${name}: ${value}\r\n`;
    const length = Buffer.byteLength(answer.body);
    head += `content-length: ${length}\r\nconnection: ${close ? 'close' : 'keep-alive'}\r\n\r\n`;
    if (length <= JOINED_ANSWER_BYTES) {
      // One buffer, one plain write: cheaper than a corked pair that Node sends through writev.
      const joined = Buffer.allocUnsafe(head.length + length);
      const at = joined.write(head, 0, 'latin1');
      if (typeof answer.body === 'string') joined.write(answer.body, at, 'utf8');
      else answer.body.copy(joined, at);
      socket.write(joined);
    } else {
      socket.cork();
      socket.write(head, 'latin1');
      socket.write(answer.body);
      socket.uncork();
    }
    if (close) return void socket.end();
    if (this.#owed === 0 && this.#request === null) {
      if (this.#ending) socket.end();
      else this.#arm(this.#options.keepAliveTimeoutMs);
    }
  }

  #endAfterAnswers(): void {
    this.#ending = true;
    if (this.#owed === 0) this.#socket.end();
  }

  /** Sends the connection back to the head with the bytes read of the request now being parsed. */
  #giveBack(): void {
    const bytes = Buffer.concat([...this.#headParts, this.#chunk.subarray(this.#requestStart, this.#chunkEnd)]);
    this.#stopped = true;
    this.#paused = true;
    clearTimeout(this.#timer);
    // Bytes not read yet stay in the kernel and travel with the socket.
    this.#socket.pause();
    void this.#answers.then(() => {
      if (!this.#socket.destroyed && !this.#socket.writableEnded) this.#options.giveBack(this.#socket, bytes);
    });
  }

  /** Drops a client that stays silent (or keeps a request head open) longer than `ms`. */
  #arm(ms: number): void {
    clearTimeout(this.#timer);
    if (ms > 0) this.#timer = setTimeout(() => this.#socket.destroy(), ms).unref();
  }
}
