import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** Connections whose first request is in the inference protocol (an inference, or a read of health or metadata) go to a worker. */
const FRONT_DOOR_REQUEST = /^(?:POST \/v2\/models\/|GET \/v2(?:\/| |\?))/;

/** The part of libuv's stream handle that stops reading (Node's own `net` uses the same fields). */
interface StreamHandle {
  reading: boolean;
  readStop(): number;
}

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
        const head = stopReading(socket, chunk);
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

/**
 * Stops the socket reading, so the bytes after `chunk` stay in the kernel and travel with the
 * file descriptor (a handle sent to another process drops what it reads meanwhile), and returns
 * `chunk` with anything the stream had buffered behind it. Resuming the socket reads again.
 */
function stopReading(socket: Socket, chunk: Buffer): Buffer {
  const handle = (socket as unknown as { _handle?: StreamHandle })._handle;
  if (handle) {
    handle.reading = false;
    handle.readStop();
  }
  const parts = [chunk];
  const read = socket._read;
  // Draining the buffer must not start a new read from the handle.
  socket._read = () => {};
  for (let part: Buffer | null; (part = socket.read() as Buffer | null) !== null;) parts.push(part);
  socket._read = read;
  return parts.length === 1 ? chunk : Buffer.concat(parts);
}
