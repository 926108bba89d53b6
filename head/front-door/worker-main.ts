import { ShutdownGate, checkInferRequest, relayToHead, serveInPlace } from '../../runtime/internal.js';
import type { InferenceBackend } from '../../runtime/internal.js';
import type { Socket } from 'node:net';
import { TroupeError, connect, createLogger, mapFromWire, mapToWire, onParentGone } from '../../runtime/internal.js';
import type { Cluster, ErrorCode } from '../../runtime/internal.js';
import { HeadToWorkerSchema } from './messages.js';
import type { HeadToWorker, WorkerSettings, WorkerToHead } from './messages.js';
import { WorkerCatalog } from './worker-catalog.js';
import { startWorkerGrpc } from './worker-grpc.js';
import { openWorkerHandoff, workerHandoff } from './worker-handoff.js';
import type { WorkerGrpc } from './worker-grpc.js';

/**
 * A front-door worker process (front-door.ts): serves the inference requests of the connections
 * the head hands it (in-place-connection.ts), calling replicas through its own SDK connection,
 * and gives a connection back to the head when a request on it is one the head must serve.
 */
const log = createLogger('front-door');
/** How often the requests answered are reported to the head. */
const REPORT_EVERY_MS = 500;

const tell = (message: WorkerToHead) => process.connected && process.send?.(message);

const handoff = workerHandoff(log);
const catalog = new WorkerCatalog((id, name) => tell({ type: 'lookup', id, name }));
const gate = new ShutdownGate();
const served = new Map<string, number>();
const failures = new Map<string, Map<ErrorCode, number>>();

/** The same checks the head makes before it queues a call (head/calls/inference.ts), then the SDK's run (of a deployment or a graph). */
function backendOf(cluster: Cluster): InferenceBackend {
  return {
    target: (params) => catalog.target(params),
    async run(request) {
      // inferResponse looked the deployment up a moment ago: known, this answers at once.
      const name = request.model === undefined ? request.deployment : `${request.deployment}:${request.model}`;
      const target = await catalog.target({ name });
      checkInferRequest(target, request);
      // A graph goes through the SDK's run too: it has no routes, so the SDK sends it to the head's
      // graph service over the worker's connection. The connection stays here, with its keep-alive.
      try {
        const future = cluster.run(target.name, mapFromWire(request.inputs, 'input'), {
          ...(request.outputs ? { outputs: request.outputs } : {}),
          ...(request.timeoutMs !== undefined ? { timeoutMs: request.timeoutMs } : {}),
          ...(request.model !== undefined ? { model: request.model } : {}),
        });
        const outputs = await future;
        const version = await future.version();
        served.set(target.name, (served.get(target.name) ?? 0) + 1);
        return { outputs: mapToWire(outputs), ...(version !== undefined ? { version } : {}) };
      } catch (err) {
        const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
        let counts = failures.get(target.name);
        if (!counts) failures.set(target.name, (counts = new Map()));
        counts.set(code, (counts.get(code) ?? 0) + 1);
        throw err;
      }
    },
  };
}

/** Connections this worker holds, and the counts the head last heard. */
let connections = 0;
let reportedConnections = 0;
let reportedOldest: number | undefined;
/**
 * HTTP connections that have sent no whole request yet (head, or a body they began), oldest first:
 * the ones the head's connection cap may drop (connection-cap.ts); a body sent a byte at a time
 * after a whole head held its place for good while only heads counted. Without them, 1,500 slowloris sockets handed here
 * filled a cap of 1,000 that the head could not make room in, and /healthz went unanswered.
 */
const unproven = new Map<Socket, number>();
/** Connections whose first request head came before `held` saw them (it can complete as a handed-over connection starts). */
const provenEarly = new WeakSet<Socket>();

/** Counts `socket` among this worker's connections until it closes; `http`: unproven (since now) until a request completes. */
function held(socket: Socket, http: boolean): void {
  connections++;
  if (http && !provenEarly.has(socket)) unproven.set(socket, Date.now());
  socket.once('close', () => {
    connections--;
    unproven.delete(socket);
  });
}

/** A body began: the connection is slow again (as of now, unless it still was) until its request is complete. */
function bodyStarted(socket: Socket): void {
  if (!socket.destroyed && !unproven.has(socket)) unproven.set(socket, Date.now());
}

function requestComplete(socket: Socket): void {
  if (!unproven.delete(socket)) provenEarly.add(socket);
}

/** Closes the oldest unproven connection, at the head's word (it is at its cap), and says so at once. */
function evict(): void {
  const oldest = unproven.keys().next().value as Socket | undefined;
  if (!oldest) return;
  unproven.delete(oldest);
  oldest.destroy();
  report();
}

function report(): void {
  const failed = Object.fromEntries([...failures].map(([name, codes]) => [name, Object.fromEntries(codes)]));
  const grpc = workerGrpc?.takeCounts() ?? [];
  const oldest = unproven.values().next().value as number | undefined;
  if (served.size === 0 && failures.size === 0 && grpc.length === 0 && connections === reportedConnections && oldest === reportedOldest)
    return;
  reportedConnections = connections;
  reportedOldest = oldest;
  const slow = { unproven: unproven.size, ...(oldest !== undefined ? { oldestUnproven: oldest } : {}) };
  tell({ type: 'report', served: Object.fromEntries(served), failed, connections, ...slow, ...(grpc.length > 0 ? { grpc } : {}) });
  served.clear();
  failures.clear();
}

async function serve(settings: WorkerSettings, pending: [Buffer, Socket][]): Promise<void> {
  const cluster = await connect(settings.headUrl, { ...(settings.token ? { token: settings.token } : {}), connectTimeoutMs: 30_000 });
  const options = {
    backend: backendOf(cluster),
    gate,
    token: settings.token,
    host: settings.host,
    maxBodyBytes: settings.maxBodyBytes,
    log,
    keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
    headersTimeoutMs: settings.headersTimeoutMs,
    relay: relayToHead(settings.internalPort),
    bodyStarted,
    requestComplete,
    giveBack: (socket: Socket, bytes: Buffer) => {
      if (!process.connected) return void socket.destroy();
      process.send!({ type: 'return' as const, head: bytes }, socket, { keepOpen: false }, (err) => err && socket.destroy());
    },
  };
  const accept = (head: Buffer, socket: Socket) => held(serveInPlace(socket, head, options), true);
  for (const [head, socket] of pending.splice(0)) accept(head, socket);
  if (settings.grpcRelayPort !== undefined) {
    const grpc = startWorkerGrpc({ ...options, relayPort: settings.grpcRelayPort });
    workerGrpc = grpc;
    for (const socket of earlyGrpc.splice(0)) grpc.inject(socket);
  }
  setInterval(report, REPORT_EVERY_MS).unref();
  handleConnection = accept;
  tell({ type: 'ready', ...(handoff ? { handoff: handoff.name } : {}) });
  log.debug({ pid: process.pid }, 'front-door worker ready');
}

/** Connections that arrive before the worker is serving wait here (the head sends none before `ready`). */
const early: [Buffer, Socket][] = [];
let handleConnection = (head: Buffer, socket: Socket): void => void early.push([head, socket]);
const earlyGrpc: Socket[] = [];
/** Serves the gRPC connections handed over, once serving (and when the head serves gRPC). */
let workerGrpc: WorkerGrpc | undefined;

onParentGone(() => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
// A terminal's Ctrl-C reaches the head's whole process group: the head drains (this worker
// finishes the requests it holds) and then stops its workers. A worker that ended at the signal
// dropped its clients' connections mid-request.
process.on('SIGINT', () => {});
process.on('message', (raw: unknown, socket?: Socket) => {
  const parsed = HeadToWorkerSchema.safeParse(raw);
  if (!parsed.success) return void log.warn({ issue: parsed.error.issues[0]?.message }, 'dropped a malformed message from the head');
  if (parsed.data.type !== 'batch') return received(parsed.data, socket);
  for (const message of parsed.data.messages) received(message);
});

function received(message: HeadToWorker, socket?: Socket): void {
  switch (message.type) {
    case 'init':
      serve(message.settings, early).catch((err: unknown) => {
        log.error({ err: (err as Error).message }, 'front-door worker could not start');
        process.exit(1);
      });
      return;
    case 'catalog':
      return catalog.replace(message.targets);
    case 'target':
      return catalog.answered(message.id, message.target);
    case 'connection': {
      const connection = message.queued ? handoff?.take() : socket;
      if (!connection) return;
      const head = Buffer.from(message.head.buffer, message.head.byteOffset, message.head.byteLength);
      return handleConnection(head, connection);
    }
    case 'handoffOpen':
      return openWorkerHandoff(handoff, message.headPid, log);
    case 'grpc-connection':
      if (!socket) return;
      held(socket, false);
      if (workerGrpc) return workerGrpc.inject(socket);
      return void earlyGrpc.push(socket);
    case 'evict':
      return evict();
    case 'drain':
      void gate.drain(60_000).then(({ unfinished }) => {
        report();
        tell({ type: 'drained', unfinished });
      });
      return;
  }
}
