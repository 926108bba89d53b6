import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { stopReading } from '../../runtime/internal.js';

/** Connections whose first request is in the inference protocol (an inference, or a read of health or metadata) go to a worker. */
export const FRONT_DOOR_REQUEST = /^(?:POST \/v2\/models\/|GET \/v2(?:\/| |\?))/;

export type HandOff = (socket: Socket, head: Buffer) => boolean;

export interface ConnectionSplit {
  /** Serves a socket here without the split, after `head`, the bytes already read of it. */
  serveHere(socket: Socket, head?: Buffer): void;
  /** Closes the connections still waiting for their first bytes (the HTTP server does not know them yet). */
  dropWaiting(): void;
}

/**
 * Reads the first bytes of every connection `server` accepts and offers those that open with an
 * inference-protocol request to `handOff` (a front-door worker); everything else (the API, the
 * status page, agents', actors' and clients' upgrades) and whatever no worker takes is served
 * here as before. A connection stays with the process it went to, so a client's kept-alive
 * connection is routed once, unless its worker gives it back (`serveHere`).
 */
export function splitConnections(server: Server, handOff: HandOff, firstBytesTimeoutMs: number): ConnectionSplit {
  const waiting = new Set<Socket>();
  const serve = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const serveHere = (socket: Socket, head?: Buffer) => {
    if (head) socket.unshift(head);
    for (const listener of serve) listener.call(server, socket);
    socket.resume();
  };
  server.on('connection', (socket: Socket) => {
    const dropped = () => socket.destroy();
    // A client that connects and says nothing is dropped like one that never finishes its headers.
    const timer = setTimeout(dropped, firstBytesTimeoutMs);
    waiting.add(socket);
    socket.once('error', dropped);
    socket.once('close', () => (clearTimeout(timer), waiting.delete(socket)));
    socket.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      waiting.delete(socket);
      socket.removeListener('error', dropped);
      socket.pause();
      if (FRONT_DOOR_REQUEST.test(chunk.toString('latin1', 0, 16))) {
        // Where Node's reading cannot be stopped (runtime/node-internals.ts), the bytes after this
        // chunk would be read here and lost to the process the descriptor went to: served here.
        const head = stopReading(socket, chunk);
        if (!head) return serveHere(socket, chunk);
        if (handOff(socket, head)) return;
        return serveHere(socket, head);
      }
      serveHere(socket, chunk);
    });
  });
  return {
    serveHere,
    dropWaiting: () => {
      for (const socket of waiting) socket.destroy();
    },
  };
}
