import { Agent, request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { errorAnswer, inferRoute, TroupeError } from '../../runtime/internal.js';
import { readInTurns } from '../http/read-in-turns.js';

/** Hop-by-hop headers: they describe one connection, not the request or answer passed on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer']);

function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/**
 * Inference requests that reach the head on a connection it serves itself (one whose first request
 * was something else: a kept-alive client that asked GET /healthz first keeps that connection with
 * the head) are passed on, as bytes, to a front-door worker over loopback: their bodies are then
 * read and parsed there, never on the head's event loop. Fourteen 63 MB JSON bodies parsed here had
 * taken the head to 3 GB and held /healthz for seconds.
 *
 * The connections to workers start at a loopback listener of the head, whose sockets it hands to
 * workers unread (front-door.ts), and are kept alive for later requests. A body in chunked encoding
 * is served here as before: a worker gives such a request back, and the head would pass it on again.
 */
export class InferenceForwarder {
  readonly #listener: Server;
  readonly #agent = new Agent({ keepAlive: true });
  #port = 0;

  private constructor(take: (socket: Socket) => boolean) {
    this.#listener = createServer({ pauseOnConnect: true }, (socket) => {
      if (!take(socket)) socket.destroy();
    });
  }

  /** Listens on loopback; `take` hands an accepted socket, nothing read of it, to a worker (false when none is ready). */
  static async start(take: (socket: Socket) => boolean): Promise<InferenceForwarder> {
    const forwarder = new InferenceForwarder(take);
    await new Promise<void>((resolve, reject) => forwarder.#listener.once('error', reject).listen(0, '127.0.0.1', resolve));
    const address = forwarder.#listener.address();
    forwarder.#port = typeof address === 'object' && address ? address.port : 0;
    return forwarder;
  }

  /** Whether `socket` is one of the forwarded connections, come back to the head: it is then served here, never passed on again. */
  carries(socket: Socket): boolean {
    return socket.localPort === this.#port;
  }

  /**
   * Passes `req` on to a worker and its answer back; false when it is no inference, or one this
   * head serves itself (a chunked body, a connection that came from a worker).
   */
  forward(req: IncomingMessage, res: ServerResponse): boolean {
    if (!inferRoute(req.method, req.url)) return false;
    if (req.headers['content-length'] === undefined || req.headers['transfer-encoding'] !== undefined) return false;
    if (this.carries(req.socket)) return false;
    const out = httpRequest({
      host: '127.0.0.1',
      port: this.#port,
      method: req.method,
      path: req.url,
      headers: endToEnd(req.headers),
      agent: this.#agent,
    });
    out.on('response', (answer) => {
      const headers = endToEnd(answer.headers);
      // A refusal the worker answered before reading the whole body (a 413) ends the client's
      // connection too: the body's unread rest must not be parsed as the next request.
      if (answer.headers.connection === 'close') headers.connection = 'close';
      res.writeHead(answer.statusCode ?? 502, headers);
      answer.pipe(res);
    });
    out.on('error', (err) => {
      if (res.headersSent) return void res.destroy();
      const failed = errorAnswer(
        new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `the front-door worker serving this request went away: ${err.message}`),
      );
      res.writeHead(failed.status, failed.headers).end(failed.body);
    });
    // A client that leaves stops the request it left, and its body's upload.
    res.once('close', () => {
      if (!res.writableFinished) out.destroy();
    });
    // Piped in turns: a 29 MB body passing through would otherwise hold this event loop while it is read.
    const turns = readInTurns(req);
    let full = false;
    req.on('data', (chunk: Buffer) => {
      if (out.write(chunk) || full) return;
      full = true;
      turns.hold('drain');
      out.once('drain', () => {
        full = false;
        turns.release('drain');
      });
    });
    req.once('end', () => out.end());
    return true;
  }

  close(): void {
    this.#agent.destroy();
    this.#listener.close();
  }
}
