import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { nanoid } from 'nanoid';
import type { Logger } from '../../runtime/internal.js';
import { AcceptLoop, routeArrivals } from './accept-loop.js';
import type { ConnectionCap } from './connection-cap.js';

export interface MainPortOptions {
  host: string;
  port: number;
  /** The head's --max-connections: the kernel's accept queue is as long, and as many may wait for their request heads. */
  cap: ConnectionCap;
  log: Logger;
  /** Where the head splits its connections (front-door workers or replicas serve inference): accept off the event loop. */
  offLoop?:
    | {
        handOff: (fd: number, line: string, whole: boolean) => boolean;
        serveHere: (socket: Socket) => void;
      }
    | undefined;
}

export interface MainPort {
  port: number;
  /** Stops accepting off the event loop and closes the connections still waiting there (the HTTP server closes the rest). */
  close(): void;
}

/**
 * Listens on the head's HTTP port. Where the head splits its connections, a thread accepts them
 * (accept-loop.ts) and the HTTP server, which must listen for Node to run its request timeouts,
 * listens on an abstract Unix address that nothing else is told of; elsewhere (no split, TLS,
 * no accept addon) the server listens on the port itself, as Node's servers do.
 */
export async function listenMainPort(app: FastifyInstance, options: MainPortOptions): Promise<MainPort> {
  const { host, port, cap, log, offLoop } = options;
  // A burst of connections past Node's backlog of 511 overflows the kernel's accept queue; one then waits its SYN-ACK retransmit.
  const backlog = Math.max(511, cap.max);
  let loop: AcceptLoop | string = 'the head serves every connection itself (no front-door workers, or TLS)';
  if (offLoop) {
    loop = await AcceptLoop.listen({
      host,
      port,
      backlog,
      capacity: cap.max,
      // A connection that says nothing, or no whole request head, for as long as Node's server allows one is closed.
      headTimeoutMs: app.server.headersTimeout,
      arrived: routeArrivals({ ...offLoop, cap, closed: () => typeof loop === 'string' || loop.closed }),
    });
  }
  if (typeof loop === 'string') {
    if (offLoop) log.info({ why: loop }, "the head's event loop accepts its HTTP connections");
    await app.listen({ host, port, backlog });
    const bound = app.server.address();
    return { port: typeof bound === 'object' && bound ? bound.port : port, close: () => {} };
  }
  const accepting = loop;
  cap.countWaiting(
    () => accepting.waiting,
    () => accepting.evictOldest(),
  );
  await app.listen({ path: `\0troupe-head-${process.pid}-${nanoid(8)}` }).catch((err: unknown) => {
    accepting.close();
    throw err;
  });
  return { port: accepting.port, close: () => accepting.close() };
}
