import type { IncomingMessage, Server } from 'node:http';
import type { ConnectionCap } from './connection-cap.js';

/** Whether `req` has a body still to come: a declared length above 0, or chunks. */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Bounds request bodies on the head's own connections as request heads are bounded: a connection
 * is proven (never dropped to make room at the cap) only once its whole request, body included,
 * has come, and a body that stops arriving for `silentMs` ends its connection, as a silent one
 * ends. Without these, a client that sent a whole head and then a byte of body every few seconds
 * held its place for good.
 */
export function boundBodies(server: Server, cap: ConnectionCap, silentMs: number): void {
  server.on('request', (req: IncomingMessage) => {
    const socket = req.socket;
    if (!hasBody(req) || req.complete) return cap.proven(socket);
    cap.slow(socket);
    socket.setTimeout(silentMs);
    req.once('end', () => {
      cap.proven(socket);
      // Back to the server's own idle bound, which a running inference must not meet.
      socket.setTimeout(server.timeout);
    });
  });
  server.on('upgrade', (req: IncomingMessage) => cap.proven(req.socket));
}
