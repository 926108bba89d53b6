import type { IncomingMessage } from 'node:http';
import { join, resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import Fastify from 'fastify';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { ACTOR_ID_HEADER, ACTOR_SECRET_HEADER, DEFAULT_MAX_FRAME_BYTES, TroupeError, createLogger } from '../runtime/index.js';
import { serveActor } from './actor-connection.js';
import { serveAgent } from './agent-connection.js';
import { checkBearer, isLoopback } from './auth.js';
import { serveClient } from './client-connection.js';
import { startAutoscaler } from './autoscaler.js';
import { Controller } from './controller.js';
import { GraphService } from './graph/service.js';
import type { ControllerOptions } from './controller.js';
import { registerHttpApi } from './http/api.js';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_MODEL_BYTES } from './http/context.js';
import { DEFAULT_LIVENESS, watchLiveness } from './liveness.js';
import type { LivenessOptions } from './liveness.js';
import { ClusterState } from './state.js';
import { registerStatusPage } from './status/index.js';

export interface HeadOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Cluster token; required when `host` is not loopback. */
  token?: string;
  liveness?: Partial<LivenessOptions>;
  controller?: Partial<ControllerOptions>;
  maxFrameBytes?: number;
  /** Where the head keeps uploaded models (default `.troupe/head` under the working directory). */
  dataDir?: string;
  /** Largest HTTP request body, e.g. an inference (default 64 MiB); 413 beyond it. */
  maxBodyBytes?: number;
  /** Largest model upload (default 1 GiB). */
  maxModelBytes?: number;
}

export interface Head {
  /** http://host:port; the WebSocket endpoints are under ws://host:port/v1/. */
  readonly url: string;
  readonly state: ClusterState;
  close(): Promise<void>;
}

function refuse(socket: Duplex, status: number, text: string, why: string): void {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nx-troupe-error: ${why}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}

/**
 * Starts the head: the HTTP API and three WebSocket endpoints on one port. `/v1/agent` for node
 * agents, `/v1/actor` for actors' data-plane sockets, `/v1/client` for SDK clients.
 */
export async function startHead(options: HeadOptions = {}): Promise<Head> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.token) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `refusing to listen on ${host} without a cluster token: set TROUPE_TOKEN or --token`);
  }
  const log = createLogger('head');
  const state = new ClusterState();
  const controller = new Controller(state, log, options.controller);
  // Graphs and the record of recent run results that futures resolve from (head/graph/).
  const graphs = new GraphService(state, controller, log);
  const stopLiveness = watchLiveness(state, controller, log, { ...DEFAULT_LIVENESS, ...options.liveness });
  const stopAutoscaler = startAutoscaler(state, controller, log);

  const app = Fastify({ logger: false });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/metrics', async (_req, reply) => reply.type(state.metrics.registry.contentType).send(await state.metrics.registry.metrics()));
  app.get('/readyz', async (_req, reply) => {
    const alive = [...state.nodes.values()].filter((n) => n.state === 'ALIVE').length;
    return reply.code(alive > 0 ? 200 : 503).send({ status: alive > 0 ? 'ready' : 'no node alive', nodes: alive });
  });
  registerHttpApi(app, {
    state,
    controller,
    log,
    host,
    token: options.token,
    dataDir: resolve(options.dataDir ?? join('.troupe', 'head')),
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    maxModelBytes: options.maxModelBytes ?? DEFAULT_MAX_MODEL_BYTES,
  });
  // The status page at `/` and its live feed at /api/v1/stream (head/status/).
  registerStatusPage(app, { state, graphs, host, token: options.token });

  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES, perMessageDeflate: false });
  const accept = (req: IncomingMessage, socket: Duplex, head: Buffer, serve: (ws: WebSocket) => void) =>
    wss.handleUpgrade(req, socket, head, serve);

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const path = new URL(req.url ?? '/', 'http://head').pathname;
    const address = req.socket.remoteAddress ?? 'unknown';
    if (path === '/v1/actor') {
      const actor = controller.authenticateActor(String(req.headers[ACTOR_ID_HEADER] ?? ''), String(req.headers[ACTOR_SECRET_HEADER] ?? ''));
      if (!actor) return refuse(socket, 401, 'Unauthorized', 'unknown actor or wrong actor secret');
      return accept(req, socket, head, (ws) => serveActor(ws, actor, controller, log));
    }
    if (path !== '/v1/agent' && path !== '/v1/client') return refuse(socket, 404, 'Not Found', `no WebSocket endpoint at ${path}`);
    if (!checkBearer(req.headers, options.token)) {
      log.warn({ path, address }, 'refused a connection with a missing or wrong token');
      return refuse(socket, 401, 'Unauthorized', 'missing or wrong cluster token');
    }
    if (path === '/v1/agent') return accept(req, socket, head, (ws) => serveAgent(ws, address, state, controller, log));
    return accept(req, socket, head, (ws) => serveClient(ws, state, controller, log, graphs));
  });

  await app.listen({ host, port: options.port ?? 8470 });
  const bound = app.server.address();
  const port = typeof bound === 'object' && bound ? bound.port : options.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  log.info({ url }, 'head listening');

  return {
    url,
    state,
    async close() {
      stopLiveness();
      stopAutoscaler();
      controller.close();
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await app.close();
    },
  };
}
