import { ShutdownGate, drainingError, requestFailed } from '../runtime/internal.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import Fastify from 'fastify';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import {
  ACTOR_ID_HEADER,
  ACTOR_SECRET_HEADER,
  DEFAULT_MAX_FRAME_BYTES,
  TroupeError,
  acceptFrames,
  createLogger,
  wantsFrames,
} from '../runtime/internal.js';
import type { FrameTransport } from '../runtime/internal.js';
import type { ActorRecord } from './state/records.js';
import { serveActor } from './connections/actor-connection.js';
import { serveAgent } from './connections/agent-connection.js';
import { checkBearer, internalOff, isLoopback } from '../runtime/internal.js';
import { agentCertificateRefusal, checkHeadTls, headServer } from './head-tls.js';
import { serveClient } from './connections/client-connection.js';
import { startAutoscaler } from './control/autoscaler.js';
import { Controller } from './control/controller.js';
import { lockDataDir } from './state/data-dir-lock.js';
import { headModelBytes } from './control/memory-estimate.js';
import type { DataDirLock } from './state/data-dir-lock.js';
import { FIRST_MESSAGE_TIMEOUT_MS } from './connections/first-message.js';
import { DurableStore } from './state/durable.js';
import type { SavedState } from './state/durable.js';
import { restoredFrom } from './state/restored.js';
import { errorHandler, sendError } from './http/errors.js';
import { clientError, notFound } from './http/not-found.js';
import { ApiDocs } from './http/openapi.js';
import { registerProbeRoutes } from './http/probe-routes.js';
import { startProbeServer } from './probe-server.js';
import { closeLinks } from './close-links.js';
import type { ClosableChannel } from './close-links.js';
import { serverReadiness } from './control/readiness.js';
import { FrontDoor } from './front-door/front-door.js';
import { capElsewhere } from './front-door/cap-elsewhere.js';
import { boundBodies } from './front-door/slow-bodies.js';
import { splitConnections } from './front-door/connection-split.js';
import { InferenceForwarder } from './front-door/forward-inference.js';
import { ConnectionCap } from './front-door/connection-cap.js';
import { listenMainPort } from './front-door/main-port.js';
import type { MainPort } from './front-door/main-port.js';
import { HandoffDoors, whyNoHandoff } from './front-door/handoff-doors.js';
import type { ConnectionSplit } from './front-door/connection-split.js';
import { fastInference } from './http/fast-infer.js';
import { startGrpcEndpoint } from './grpc/server.js';
import { httpRefusal, listenRefusal, portsRefused } from './busy-ports.js';
import { labelsOf, stateBackend } from './http/state-backend.js';
import { RunGateway } from './graph/run-gateway.js';
import { GraphStreams } from './graph/graph-streams.js';
import { ActorCalls } from './calls/actor-calls.js';
import { Deployments } from './control/deployments.js';
import { registerHttpApi } from './http/api.js';
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_MODEL_BYTES } from './http/context.js';
import { DEFAULT_LIVENESS, watchLiveness } from './control/liveness.js';
import { choosesReplicasAtLoad, joiningActor } from './state/record-changes.js';
import { ClusterState } from './state/cluster-state.js';
import { registerStatusPage } from './status/index.js';
import { settledWithin } from './settled-within.js';
import { DEFAULT_DRAIN_MS, DEFAULT_MAX_CONNECTIONS, SILENT_CONNECTION_MS } from './head-options.js';
import type { Head, HeadOptions } from './head-options.js';

export { DEFAULT_DRAIN_MS, DEFAULT_MAX_CONNECTIONS, SILENT_CONNECTION_MS } from './head-options.js';
export type { Head, HeadOptions, HeadTlsOptions } from './head-options.js';

function refuse(socket: Duplex, status: number, text: string, why: string): void {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nx-troupe-error: ${why}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}

/**
 * Starts the head: the HTTP API and three connection endpoints on one port. `/v1/agent` for node
 * agents, `/v1/actor` for actors' data-plane connections, `/v1/client` for SDK clients. Actors and
 * clients upgrade to a frame stream (`Upgrade: troupe-frames`) rather than a WebSocket when they
 * reach the head over plain HTTP; both carry the same messages.
 */
export async function startHead(options: HeadOptions = {}): Promise<Head> {
  const host = options.host ?? '127.0.0.1';
  // Before the data directory is made: a refused start leaves nothing behind.
  if (!isLoopback(host) && !options.token) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `refusing to listen on ${host} without a cluster token: set TROUPE_TOKEN or --token`);
  }
  checkHeadTls(options);
  const dataDir = resolve(options.dataDir ?? join('.troupe', 'head'));
  // Only a head that keeps its state in the directory needs it to itself (head/state/data-dir-lock.ts).
  const lock = (options.persistState ?? options.dataDir !== undefined) ? await lockDataDir(dataDir) : undefined;
  // What a start that fails part way must stop again, last started first.
  const started: (() => unknown)[] = [];
  try {
    return await runHead(options, dataDir, lock, started);
  } catch (err) {
    for (const stop of started.reverse()) await stop();
    await lock?.release();
    throw err;
  }
}

async function runHead(options: HeadOptions, dataDir: string, lock: DataDirLock | undefined, started: (() => unknown)[]): Promise<Head> {
  const host = options.host ?? '127.0.0.1';
  const log = createLogger('head');
  const state = new ClusterState();
  let store: DurableStore | undefined;
  let saved: SavedState | undefined;
  if (lock) ({ store, saved } = await DurableStore.open(dataDir, log, options.discardState ?? false));
  const controller = new Controller(state, log, { modelBytes: headModelBytes(dataDir), ...options.controller }, store);
  // Before anything listens: an actor that reconnects at once must find its record.
  if (saved) controller.restore(saved);
  const gate = new ShutdownGate();
  // Graphs and the record of recent run results that futures resolve from (head/graph/).
  const graphs = new RunGateway(state, controller, log);
  // Every entry point (SDK frames, HTTP, the CLI through HTTP) deploys and deletes through this one service.
  const deployments = new Deployments(state, controller, graphs, log, store);
  // Method calls on class actors, from SDK frames and HTTP alike (head/calls/actor-calls.ts).
  const actors = new ActorCalls(state);
  // Runs read as streams (graphs with generator method steps), from SDK frames and HTTP alike.
  const graphStreams = new GraphStreams(graphs);
  const stopLiveness = watchLiveness(state, controller, log, { ...DEFAULT_LIVENESS, ...options.liveness });
  const stopAutoscaler = startAutoscaler(state, controller, log);
  started.push(
    () => store?.close(),
    () => controller.close(),
    stopAutoscaler,
    stopLiveness,
  );

  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const cap = new ConnectionCap(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS);
  state.metrics.connectionCounts = () => ({ open: cap.open, waiting: cap.waiting });
  const tls = options.tls;
  // Under TLS the head serves every connection itself (checkHeadTls).
  const httpWorkers = tls ? 0 : (options.httpWorkers ?? Math.min(availableParallelism(), 4));
  let frontDoor: FrontDoor | undefined;
  let forwarder: InferenceForwarder | undefined;
  let split: ConnectionSplit | undefined;
  // Replicas serve HTTP themselves by default where that is safe (handoff-doors.ts HandoffMode);
  // `httpHandoff: true` hands connections to every replica, `false` to none.
  const doors =
    httpWorkers > 0 && options.httpHandoff !== false
      ? HandoffDoors.create({
          log,
          mode: options.httpHandoff === true ? 'always' : 'auto',
          readyReplicas: (deployment) => state.deployments.get(deployment)?.actors.filter((a) => a.state === 'READY').length ?? 0,
          chosenAtLoad: (deployment) => ((d) => d !== undefined && choosesReplicasAtLoad(d.spec))(state.deployments.get(deployment)),
          serveHere: (socket, head) => split?.serveHere(socket, head),
          labels: (deployment) => ((d) => d && labelsOf(d))(state.deployments.get(deployment)),
          handedOver: (model, actor) => state.metrics.handoffs.inc({ model, actor }),
          settings: () => ({
            relayPort: frontDoor?.relayPort ?? 0,
            ...(options.token ? { token: options.token } : {}),
            host,
            maxBodyBytes,
            keepAliveTimeoutMs: app.server.keepAliveTimeout,
            headersTimeoutMs: app.server.headersTimeout,
          }),
        })
      : undefined;
  // describe() and the status page say who serves each deployment's HTTP, and why.
  const noDoors = whyNoHandoff(httpWorkers, options.httpHandoff);
  state.httpServing = (deployment) => doors?.serving(deployment) ?? { byReplica: false, why: noDoors };
  const backend = stateBackend(state, graphs);
  const inference = fastInference({ backend, gate, token: options.token, host, maxBodyBytes, log });
  const app = Fastify({
    logger: false,
    // Past fastify's default of 100, a long path parameter got fastify's own 414 and error body;
    // up to this length the routes see it and refuse it with a TROUPE_ERR_* that names it.
    routerOptions: { maxParamLength: 2048 },
    // Node's parser errors and fastify's router errors answer in the API's shape too.
    clientErrorHandler: clientError,
    frameworkErrors: (err, request, reply) => sendError(reply, requestFailed(log, err, request, maxBodyBytes)),
    // Inference requests are served ahead of fastify (http/fast-infer.ts); everything else by it.
    // The server's timeouts are fastify's, which it sets only on servers it makes itself.
    serverFactory: (handler, settings) => {
      const timeouts = settings as { keepAliveTimeout: number; requestTimeout: number; connectionTimeout: number };
      // An inference on a connection the head serves goes on to a worker, whose event loop parses its body.
      // A connection that says nothing, or no whole request head, for 10 s is closed (docs/security.md):
      // Node's default of 60 s let slow or silent sockets hold the connection cap six times as long,
      // and it checks its timeouts every second instead of every 30 s.
      const serve = (req: IncomingMessage, res: ServerResponse) =>
        (frontDoor?.serving && !gate.draining && forwarder?.forward(req, res)) || inference(req, res) || handler(req, res);
      const server = headServer(tls, { headersTimeout: SILENT_CONNECTION_MS, connectionsCheckingInterval: 1000 }, serve);
      // The cap is the head's own (connection-cap.ts), over both ports and the workers' connections;
      // Node's, twice as high, only backs it (past it Node closes a socket before any byte is read).
      server.maxConnections = 2 * cap.max;
      server.keepAliveTimeout = timeouts.keepAliveTimeout;
      server.requestTimeout = timeouts.requestTimeout;
      server.setTimeout(timeouts.connectionTimeout);
      if (httpWorkers > 0)
        split = splitConnections(
          server,
          (socket, head) => doors?.take(socket, head) || (frontDoor?.take(socket, head) ?? false),
          server.headersTimeout,
        );
      // Before the split reads a byte: a connection past the cap is closed, or takes a slow one's place.
      // Under TLS the requests come on the TLS socket, not on this one, so such a connection is
      // never proven: it is counted but not dropped for room (the handshake timeout bounds slow ones).
      server.prependListener('connection', (socket: Socket) => {
        if (!cap.admit(socket, !tls)) socket.destroy();
      });
      // A whole request came (an upgrade's too: agents', actors' and clients' sockets are never dropped for room).
      boundBodies(server, cap, SILENT_CONNECTION_MS);
      return server;
    },
  });
  const docs = new ApiDocs();
  docs.watch(app);
  // While draining, requests that would start work are refused (503, Retry-After); the ones
  // already accepted are counted until their response is done, so the drain waits for them.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS') return done();
    if (gate.draining) {
      // Answered here: a hook that sends a reply does not call done().
      void sendError(reply, drainingError(request.method, request.url));
      return;
    }
    reply.raw.once('close', gate.enter());
    done();
  });
  // Every error in the API's shape, fastify's own included (head/http/not-found.ts).
  app.setErrorHandler(errorHandler(log, maxBodyBytes));
  app.setNotFoundHandler(notFound(app));
  registerProbeRoutes(app, docs, state, () => gate.draining);
  registerHttpApi(app, {
    docs,
    state,
    controller,
    graphs,
    deployments,
    actors,
    graphStreams,
    log,
    host,
    token: options.token,
    dataDir,
    maxBodyBytes,
    maxModelBytes: options.maxModelBytes ?? DEFAULT_MAX_MODEL_BYTES,
    streamIdleMs: options.streamIdleMs,
    draining: () => gate.draining,
    ...(options.jobs ? { jobOptions: options.jobs } : {}),
  });
  // The status page at `/` and its live feed at /api/v1/stream (head/status/).
  registerStatusPage(app, { state, graphs, host, token: options.token, secure: tls !== undefined, draining: () => gate.draining, docs });

  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const wss = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes, perMessageDeflate: false });
  // Connections upgraded to frame streams (`Upgrade: troupe-frames`: actors, and SDK clients over
  // plain HTTP), kept to be closed on shutdown; WebSockets are in wss.clients. A client's calls
  // arrive in pooled frames, given back once they succeeded (client-connection.ts); an actor's
  // replies are exact allocations, as their tensors are handed on to callers who may keep them.
  const streams = new Set<ClosableChannel>();
  const frames = (socket: Duplex, head: Buffer, pooled: boolean) => acceptFrames(socket, head, { maxFrameBytes, pooled });
  const track = (channel: ClosableChannel) => {
    streams.add(channel);
    void channel.whenClosed.then(() => streams.delete(channel));
  };
  /** Counts an actor's link while it is open, by the way it came. */
  const countLink = <C extends { whenClosed: Promise<unknown> }>(channel: C, via: 'connection' | 'agent'): C => {
    state.metrics.actorLinks.inc({ via });
    void channel.whenClosed.then(() => state.metrics.actorLinks.dec({ via }));
    return channel;
  };
  const firstMessageTimeoutMs = options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS;
  // What replicas present on their direct ports under TLS, handed to each agent when it registers.
  const directTls = tls && { cert: tls.cert.toString(), key: tls.key.toString() };
  const clientOptions = { gate, firstMessageTimeoutMs, actors, graphStreams };
  const restoreTimeoutS = (actor: ActorRecord) => state.deployments.get(actor.deployment)?.spec.restoreTimeoutS;
  // Actor links an agent relays over its own connection are served as /v1/actor serves a connection.
  const actorLinks = {
    join: (actorId: string, secret: string) => joiningActor(state, actorId, secret),
    serve: (transport: FrameTransport, actor: ActorRecord) => {
      const channel = countLink(serveActor(transport, actor, controller, log, doors, restoreTimeoutS(actor)), 'agent');
      track(channel);
      return channel;
    },
  };
  const accept = (req: IncomingMessage, socket: Duplex, head: Buffer, serve: (ws: WebSocket) => void) =>
    wss.handleUpgrade(req, socket, head, serve);

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const path = new URL(req.url ?? '/', 'http://head').pathname;
    const address = req.socket.remoteAddress ?? 'unknown';
    if (path === '/v1/actor') {
      const actor = joiningActor(state, String(req.headers[ACTOR_ID_HEADER] ?? ''), String(req.headers[ACTOR_SECRET_HEADER] ?? ''));
      if (!actor) return refuse(socket, 401, 'Unauthorized', 'unknown actor or wrong actor secret');
      if (!wantsFrames(req))
        return accept(req, socket, head, (ws) =>
          countLink(serveActor(ws, actor, controller, log, doors, restoreTimeoutS(actor)), 'connection'),
        );
      return track(countLink(serveActor(frames(socket, head, false), actor, controller, log, doors, restoreTimeoutS(actor)), 'connection'));
    }
    if (path !== '/v1/agent' && path !== '/v1/client') return refuse(socket, 404, 'Not Found', `no connection endpoint at ${path}`);
    // On loopback an SDK client without the token may run inference, as HTTP and gRPC callers
    // may there (docs/security.md); a wrong token is still refused, so a mistake is said at once.
    const tokenless = path === '/v1/client' && isLoopback(host) && req.headers.authorization === undefined;
    if (!checkBearer(req.headers, options.token) && !tokenless) {
      log.warn({ path, address }, 'refused a connection with a missing or wrong token');
      return refuse(socket, 401, 'Unauthorized', 'missing or wrong cluster token');
    }
    const uncertified = path === '/v1/agent' ? agentCertificateRefusal(tls, req) : undefined;
    if (uncertified) {
      log.warn({ address, why: uncertified }, 'refused an agent without a certificate signed by --tls-agent-ca');
      return refuse(socket, 401, 'Unauthorized', "agent certificate missing or not signed by the head's --tls-agent-ca");
    }
    if (path === '/v1/agent')
      return accept(req, socket, head, (ws) => serveAgent(ws, address, controller, log, actorLinks, firstMessageTimeoutMs, directTls));
    const serving = { ...clientOptions, withoutToken: options.token !== undefined && !checkBearer(req.headers, options.token) };
    if (!wantsFrames(req)) return accept(req, socket, head, (ws) => serveClient(ws, state, deployments, log, graphs, serving));
    return track(serveClient(frames(socket, head, true), state, deployments, log, graphs, serving));
  });

  await app.ready();
  docs.checkComplete();
  const wantedPort = options.port ?? 8470;
  // Before HTTP listens: a gRPC port that is taken fails the start with nothing left listening,
  // and the message names the HTTP port too when it is taken as well.
  const grpc =
    options.grpcPort === undefined
      ? undefined
      : await startGrpcEndpoint(
          {
            state,
            graphs,
            backend,
            gate,
            token: options.token,
            host,
            maxBodyBytes,
            log,
            count: (method, outcome) => state.metrics.grpcRequests.inc({ method, outcome }),
            ...(tls ? { tls: { cert: tls.cert, key: tls.key } } : {}),
          },
          options.grpcPort,
          // Its connections go to the front-door workers once they are up, as HTTP ones do.
          (socket) => frontDoor?.takeGrpc(socket) ?? false,
          (socket) => cap.admit(socket, false),
        ).catch(async (err: unknown) => {
          if (!(err instanceof TroupeError) || err.code !== 'TROUPE_ERR_BAD_FLAG') throw err;
          const http = await listenRefusal(host, wantedPort);
          throw portsRefused([err.message, ...(http ? [httpRefusal(host, wantedPort, http)] : [])]);
        });
  let mainPort: MainPort;
  try {
    const handOff = (fd: number, line: string, whole: boolean) =>
      doors?.takeDescriptor(fd, line, whole) || (frontDoor?.takeDescriptor(fd) ?? false);
    mainPort = await listenMainPort(app, { host, port: wantedPort, cap, log, offLoop: split && { handOff, serveHere: split.serveHere } });
  } catch (err) {
    await grpc?.close(0);
    // A port in use or not ours to take is the operator's to change, as the gRPC port's is.
    throw portsRefused([httpRefusal(host, wantedPort, (err as Error).message)]);
  }
  started.push(() => mainPort.close());
  const probes =
    options.probePort === undefined
      ? undefined
      : await startProbeServer(host, options.probePort, tls, () => serverReadiness(state, gate.draining), log).catch(
          async (err: unknown) => {
            await Promise.all([grpc?.close(0), app.close()]);
            throw new TroupeError(
              'TROUPE_ERR_BAD_FLAG',
              `head: --probe-port ${options.probePort}: ${(err as Error).message}; give another, or 0 for any`,
            );
          },
        );
  const port = mainPort.port;
  const url = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (split) {
    frontDoor = await FrontDoor.start({
      workers: httpWorkers,
      state,
      graphs,
      log,
      serveHere: split.serveHere,
      settings: {
        // Workers reach the head on loopback even when it listens on every interface.
        headUrl: /^(0\.0\.0\.0|::|\[::\])$/.test(host) ? `http://127.0.0.1:${port}` : url,
        ...(options.token ? { token: options.token } : {}),
        host,
        maxBodyBytes,
        keepAliveTimeoutMs: app.server.keepAliveTimeout,
        headersTimeoutMs: app.server.headersTimeout,
        ...(grpc ? { grpcRelayPort: grpc.relayPort } : {}),
      },
    });
    const door = frontDoor;
    capElsewhere(cap, door, doors);
    // Only where workers read connections in place: without that internal they give every
    // connection back to the head, and a forwarded one came back unread (a 408 after 10 s).
    if (!internalOff('socket-handle')) forwarder = await InferenceForwarder.start((socket) => door.takeUnread(socket));
  }
  log.info({ url, grpc: grpc?.address, probes: probes?.url, stateFile: store?.file, httpWorkers }, 'head listening');
  // Graphs come back once the deployments they call are READY again (graphs.deploy waits for them).
  for (const [name, doc] of saved?.graphs ?? []) {
    graphs.deploy(doc).then(
      () => log.info({ graph: name }, 'restored a graph'),
      (err: unknown) => log.warn({ graph: name, err: (err as Error).message }, 'could not restore a graph'),
    );
  }

  let closing: Promise<void> | undefined;
  return {
    url,
    grpcAddress: grpc?.address,
    probeUrl: probes?.url,
    state,
    restored: restoredFrom(store, saved),
    close() {
      closing ??= (async () => {
        const drainMs = options.drainMs ?? DEFAULT_DRAIN_MS;
        log.info({ inFlight: gate.inFlight, drainMs }, 'shutting down: finishing accepted calls, refusing new ones');
        doors?.drain();
        const [{ unfinished }] = await Promise.all([gate.drain(drainMs), frontDoor?.drain(drainMs)]);
        if (unfinished > 0) log.warn({ unfinished, drainMs }, 'calls still unfinished after the drain period; closing anyway');
        // The accepted gRPC calls are answered (the gate counted them); open streams get a second.
        await grpc?.close(1000);
        // Before the server closes: it waits for the connections it handed to workers, and for
        // those still to say their first bytes.
        await frontDoor?.close();
        forwarder?.close();
        doors?.close();
        mainPort.close();
        split?.dropWaiting();
        stopLiveness();
        stopAutoscaler();
        controller.close();
        await store?.close();
        // The last write is on disk: the next head may take the directory.
        await lock?.release();
        await closeLinks(wss, streams);
        // HTTP requests still open after the drain (a status page's event stream, a slow client)
        // get a second, then their connections are closed: a shutdown must not wait on them.
        const closed = app.close().then(() => true);
        if (!(await settledWithin(closed, 1000))) app.server.closeAllConnections();
        // Bounded too: Node's count of the server's connections can outlive them (a socket sent to
        // a worker that exited before taking it is never released), and then close never calls back.
        if (!(await settledWithin(closed, 1000))) log.warn('the HTTP server did not report closed; exiting without it');
        await probes?.close();
      })();
      return closing;
    },
  };
}
