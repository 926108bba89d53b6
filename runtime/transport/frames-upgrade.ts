import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TroupeError } from '../errors.js';
import { FrameStream } from './frame-stream.js';
import type { FrameStreamOptions } from './frame-stream.js';

/**
 * The `Upgrade` token that turns an HTTP connection into a length-prefixed frame stream (see
 * frame-stream.ts): how actors and SDK clients reach the head on its one port without WebSocket
 * framing, so a call's tensors are read in place into pooled buffers, as direct calls are.
 */
export const FRAMES_UPGRADE = 'troupe-frames';

/** The cause of an upgrade the server answered with an HTTP status instead of switching. */
export class UpgradeDeclined extends Error {
  constructor(readonly httpStatus: number) {
    super(`upgrade answered with HTTP ${httpStatus}`);
  }
}

/** Whether an upgrade request asks for a frame stream (rather than a WebSocket). */
export function wantsFrames(req: IncomingMessage): boolean {
  return String(req.headers.upgrade ?? '').toLowerCase() === FRAMES_UPGRADE;
}

/**
 * Server side: answers an upgrade request that {@link wantsFrames} with 101 and takes the socket
 * over. `head` is what Node's parser read past the request's headers.
 */
export function acceptFrames(socket: Duplex, head: Buffer, options: FrameStreamOptions): FrameStream {
  // A fresh connection's send buffer is empty: this short write leaves at once, before the move.
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${FRAMES_UPGRADE}\r\nconnection: Upgrade\r\n\r\n`);
  return FrameStream.adopt(socket as Socket, options, head);
}

/**
 * Client side: asks `url` (http:) to switch to a frame stream, presenting `headers`; resolves with
 * the stream. Rejects with TROUPE_ERR_UNAUTHORIZED when the server answers 401, and with
 * TROUPE_ERR_CONNECTION_CLOSED for any other answer (its cause an {@link UpgradeDeclined}), a
 * socket error, or no answer within `timeoutMs`.
 */
export function upgradeToFrames(
  url: URL,
  headers: Record<string, string>,
  options: FrameStreamOptions & { timeoutMs: number },
): Promise<FrameStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      agent: false,
      headers: { ...headers, connection: 'Upgrade', upgrade: FRAMES_UPGRADE },
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `no upgrade from ${url.href} within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    req.once('upgrade', (res: IncomingMessage, socket: Socket, head: Buffer) => {
      clearTimeout(timer);
      if (String(res.headers.upgrade ?? '').toLowerCase() !== FRAMES_UPGRADE) {
        socket.destroy();
        reject(
          new TroupeError(
            'TROUPE_ERR_CONNECTION_CLOSED',
            `${url.href} switched to '${String(res.headers.upgrade)}', not ${FRAMES_UPGRADE}`,
          ),
        );
        return;
      }
      resolve(FrameStream.adopt(socket, options, head));
    });
    req.once('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      res.resume();
      req.destroy();
      const why = res.headers['x-troupe-error'];
      const message = `${url.href} refused the upgrade: HTTP ${res.statusCode}${why ? ` ${String(why)}` : ''}`;
      const code = res.statusCode === 401 ? 'TROUPE_ERR_UNAUTHORIZED' : 'TROUPE_ERR_CONNECTION_CLOSED';
      reject(new TroupeError(code, message, { cause: new UpgradeDeclined(res.statusCode ?? 0) }));
    });
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `could not connect to ${url.href}: ${err.message}`));
    });
    req.end();
  });
}
