import { EventEmitter } from 'node:events';
import { Socket } from 'node:net';
import type { Server, SocketConstructorOpts } from 'node:net';

/**
 * Every use Troupe makes of Node's undocumented internals (and one of grpc-js's), each behind a check that it is there and
 * shaped as this code expects, and each with what its callers do without it. They buy speed only:
 * reading sockets into buffers of our choosing (`onread`, which Node offers only to sockets it
 * makes), moving a connection's descriptor to another process, and wider HTTP/2 windows. Without
 * one, the same requests are served, slower:
 *
 * | internal | where | without it |
 * | --- | --- | --- |
 * | `socket-handle`: `socket._handle` (libuv's stream handle: `readStart`, `readStop`, `reading`) moved into `new Socket({ handle })` | `FrameStream.adopt`, `serveInPlace` | frames: Node's chunks are copied in; HTTP: the connection goes back to the head's own server |
 * | `socket-fd`: `socket._handle.fd` (a socket's, or a listening server's) | `HandoffDoors.take`, `HttpDoor`, `AcceptLoop.listen` | no handoff: the front-door workers serve every connection; the head's event loop accepts its connections itself |
 * | `read-stop`: `_handle.readStop()` and a no-op `socket._read` while draining | `splitConnections` | the head serves the connection itself instead of passing it to a worker |
 * | `manual-start`: `new Socket({ fd, manualStart: true })`, a socket that has not begun reading | `HttpDoor.take`, `HandoffDoors.connectionBack` | the socket reads at once; `moveHandle` stops it first, or declines it once it has read |
 * | `grpc-http2-servers`: grpc-js's private `Server.http2Servers`, to reach the HTTP/2 sessions of injected connections (grpc-js has no option for a server session's windows) | `connectionInjector` (gRPC) | HTTP/2's default 64 KiB windows |
 * | `http-message`: `socket._httpMessage`, the response an HTTP server is writing on it | `clientError` | none can be told apart from "no response under way": an error answer is written after a response's headers (the client sees a malformed answer, then the connection ends, as it would anyway) |
 *
 * test/unit/node-internals.test.ts checks each one on the Node line it runs on and fails naming the
 * one that changed; CI runs it on every line `engines` names. TROUPE_NODE_INTERNALS_OFF (a comma
 * list of the names above, or `all`) turns them off in a process, as a Node line without them would.
 */
export type NodeInternal = 'socket-handle' | 'socket-fd' | 'read-stop' | 'manual-start' | 'grpc-http2-servers' | 'http-message';

export const NODE_INTERNALS: readonly NodeInternal[] = [
  'socket-handle',
  'socket-fd',
  'read-stop',
  'manual-start',
  'grpc-http2-servers',
  'http-message',
];

/** The part of libuv's stream handle used here (Node's own `net` uses the same fields). */
interface StreamHandle {
  fd?: number;
  reading?: boolean;
  readStart(): number;
  readStop(): number;
}

/** Whether `name` is turned off in this process (read on each use: connections are rare next to what they carry). */
export function internalOff(name: NodeInternal): boolean {
  const off = process.env.TROUPE_NODE_INTERNALS_OFF;
  if (!off) return false;
  const names = off.split(',').map((s) => s.trim());
  return names.includes('all') || names.includes(name);
}

const warned = new Set<NodeInternal>();

/** Says once per process that an internal is missing, so an operator sees why a path is slower. */
function missing(name: NodeInternal, why: string): undefined {
  if (!internalOff(name) && !warned.has(name)) {
    warned.add(name);
    process.emitWarning(`Node ${process.version}: ${why}; Troupe goes without it (runtime/node-internals.ts)`, {
      code: 'TROUPE_NODE_INTERNAL_MISSING',
    });
  }
  return undefined;
}

function streamHandle(socket: Socket): StreamHandle | undefined {
  const handle = (socket as unknown as { _handle?: unknown })._handle;
  if (handle === null || typeof handle !== 'object') return undefined;
  const h = handle as Partial<StreamHandle>;
  return typeof h.readStart === 'function' && typeof h.readStop === 'function' ? (h as StreamHandle) : undefined;
}

/** The new socket's options: `onread` reads into the caller's buffers (Node's socket option). */
export interface MovedSocketOptions {
  onread: { buffer: () => Uint8Array; callback: (n: number, buffer: Uint8Array) => boolean | void };
  readable: true;
  writable: true;
  allowHalfOpen?: boolean;
}

/**
 * Moves the handle of `socket`, which must have delivered no bytes yet, into a new socket made with
 * `options` (`onread` among them), as Node does when it accepts; `socket` is left an empty shell and
 * destroyed (closing it closes nothing; its server counts the connection gone). Undefined, with
 * `socket` untouched, where the handle is not there, not shaped as expected, or bytes were already
 * read from it (they would be lost with the shell).
 */
export function moveHandle(socket: Socket, options: MovedSocketOptions): Socket | undefined {
  if (internalOff('socket-handle')) return undefined;
  const handle = streamHandle(socket);
  if (!handle) return missing('socket-handle', 'net.Socket has no libuv stream handle at _handle');
  if (socket.readableLength > 0) return undefined;
  // Nothing is delivered within this turn, so a handle that has begun reading has read nothing yet.
  if (handle.reading) {
    handle.reading = false;
    handle.readStop();
  }
  (socket as unknown as { _handle: unknown })._handle = null;
  socket.destroy();
  return new Socket({ ...options, handle } as SocketConstructorOpts);
}

/** The file descriptor under `socket` (Linux), or undefined: closed, or a Node without `_handle.fd`. */
export function descriptorOf(socket: Socket): number | undefined {
  if (internalOff('socket-fd')) return undefined;
  const handle = streamHandle(socket);
  if (!handle) return socket.destroyed ? undefined : missing('socket-fd', 'net.Socket has no libuv stream handle at _handle');
  const fd = handle.fd;
  if (typeof fd !== 'number') return missing('socket-fd', 'the stream handle has no fd');
  return fd >= 0 ? fd : undefined;
}

/** The listening socket's file descriptor under `server` (Linux), or undefined: not listening, or a Node without `_handle.fd`. */
export function listenerDescriptor(server: Server): number | undefined {
  if (internalOff('socket-fd')) return undefined;
  const handle = (server as unknown as { _handle?: { fd?: unknown } | null })._handle;
  if (!handle) return undefined;
  if (typeof handle.fd !== 'number') return missing('socket-fd', 'the listening handle has no fd');
  return handle.fd >= 0 ? handle.fd : undefined;
}

/**
 * Stops `socket` (paused, having emitted `chunk`) reading from the kernel, so the bytes after
 * `chunk` stay there and travel with its descriptor to another process; returns `chunk` with what
 * the stream had buffered behind it. Undefined, the socket untouched, where the handle cannot be
 * stopped: the caller then serves the connection in this process.
 */
export function stopReading(socket: Socket, chunk: Buffer): Buffer | undefined {
  if (internalOff('read-stop')) return undefined;
  const handle = streamHandle(socket);
  if (!handle) return missing('read-stop', 'net.Socket has no libuv stream handle at _handle');
  if (typeof socket._read !== 'function') return missing('read-stop', 'net.Socket has no _read');
  handle.reading = false;
  handle.readStop();
  const parts = [chunk];
  const read = socket._read;
  // Draining the buffer must not start a new read from the handle (Readable.read calls _read).
  socket._read = () => {};
  try {
    for (let part: Buffer | null; (part = socket.read() as Buffer | null) !== null;) parts.push(part);
  } finally {
    socket._read = read;
  }
  return parts.length === 1 ? chunk : Buffer.concat(parts);
}

/**
 * A socket over `fd` that has not begun reading (`manualStart`, an option Node's child_process
 * uses), so that `moveHandle` can take its handle with nothing read. Where the option is ignored
 * the socket reads at once, and `moveHandle` then declines it.
 */
export function socketOverDescriptor(fd: number): Socket {
  return new Socket({ fd, readable: true, writable: true, manualStart: !internalOff('manual-start') } as SocketConstructorOpts);
}

/** What the gRPC server sets on a connection's HTTP/2 session. */
export interface Http2Windows {
  setLocalWindowSize(n: number): void;
  settings(s: { initialWindowSize: number }): void;
}

/**
 * Hands `listener` the HTTP/2 session of each connection that `grpcServer` (a grpc-js `Server`)
 * serves through the connection injector it made last: grpc-js keeps the HTTP/2 server of each
 * injector in its private Map `http2Servers`, whose `session` event is Node's public one. Returns
 * false where that Map is not there as expected: the sessions then keep HTTP/2's default windows.
 * (Before this, a symbol named `session` on the socket was looked for; no Node line from 20 to 24
 * sets one, so the wide windows were never applied.)
 */
export function onInjectedHttp2Sessions(grpcServer: object, listener: (session: Http2Windows) => void): boolean {
  if (internalOff('grpc-http2-servers')) return false;
  const servers = (grpcServer as { http2Servers?: unknown }).http2Servers;
  const newest = servers instanceof Map ? ([...servers.keys()].at(-1) as unknown) : undefined;
  if (!(newest instanceof EventEmitter) || typeof (newest as { setTimeout?: unknown }).setTimeout !== 'function') {
    missing('grpc-http2-servers', "grpc-js's Server has no Map of HTTP/2 servers at http2Servers");
    return false;
  }
  newest.on('session', (session: Http2Windows) => listener(session));
  return true;
}

/** Whether Node's HTTP server has begun writing a response's head on `socket` (its `_httpMessage`). */
export function responseStarted(socket: Socket): boolean {
  if (internalOff('http-message')) return false;
  const message = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  return message?.headersSent === true;
}
