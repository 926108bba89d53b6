import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { childNodeArgs, descriptorOf, handoffAddon, socketOverDescriptor } from '../../runtime/internal.js';
import type { ErrorCode, HandoffAddon, Logger } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { RunGateway } from '../graph/run-gateway.js';
import { allTargets, lookupTarget } from '../http/state-backend.js';
import { WorkerToHeadSchema } from './messages.js';
import type { HeadToWorker, WorkerSettings } from './messages.js';

const WORKER_SCRIPT = fileURLToPath(new URL('./worker-main.js', import.meta.url));
/** A worker that keeps dying is started again after a back-off that doubles up to this. */
const MAX_BACKOFF_MS = 5_000;

export interface FrontDoorOptions {
  workers: number;
  settings: Omit<WorkerSettings, 'internalPort'>;
  state: ClusterState;
  /** Graphs are served like deployments: a worker runs them through its SDK connection (the head's graph service). */
  graphs: RunGateway;
  log: Logger;
  /** Serves a socket in the head itself, after `head`, the bytes read of it already. */
  serveHere: (socket: Socket, head?: Buffer) => void;
}

interface Worker {
  child: ChildProcess;
  ready: boolean;
  /** Connections it holds, and of those the unproven ones (no whole request head yet), as it last reported them. */
  connections: number;
  unproven: number;
  /** When its oldest unproven connection came (ms since the epoch). */
  oldestUnproven: number;
  /** Resolves when the worker said it drained, or exited. */
  drained?: () => void;
  /** The head's end of the worker's handoff socket (worker-handoff.ts), or -1: sockets then go with IPC messages. */
  link: number;
  /** Messages not yet written to the worker: those of one turn of the event loop go in one write (#flush). */
  outbox: HeadToWorker[];
  /** Connections for the worker whose descriptors wait for room on its handoff socket, in order (#pass). */
  waiting: Waiting[];
  /** Set while `waiting` waits for room. */
  retry: NodeJS.Timeout | undefined;
}

/** A connection on its way to a worker: a socket of the head's, or a bare descriptor (accept-loop.ts) with nothing read of it. */
type Waiting = { socket: Socket; head: Buffer } | { fd: number; head: Buffer };

/**
 * The head's front door for inference: worker processes that serve the Open Inference Protocol
 * on connections the head hands them (connection-split.ts), each calling replicas straight
 * through an SDK connection of its own, with shared memory for large inputs on this host. HTTP
 * parsing, body reading and tensor encoding then run on as many cores as there are workers
 * instead of on the head's one event loop, which stays free for the control plane.
 *
 * The head keeps each worker's catalog of deployments current (pushed on every change, asked for
 * on a miss), restarts a worker that dies (with back-off; its connections are lost, as with any
 * server process), drains them with itself and stops them by pid.
 */
export class FrontDoor {
  readonly #options: FrontDoorOptions;
  readonly #workers: Worker[] = [];
  /** Loopback only: where workers relay the protocol's reads (served here, never handed off). */
  readonly #internal: Server;
  #internalPort = 0;
  readonly #stopWatching: (() => void)[];
  #next = 0;
  #catalog = '';
  #closing = false;
  /** Passes connections' descriptors to workers (undefined where it cannot load: Node's IPC carries them). */
  readonly #addon: HandoffAddon | undefined;

  private constructor(options: FrontDoorOptions) {
    this.#options = options;
    const addon = handoffAddon();
    this.#addon = typeof addon === 'string' ? undefined : addon;
    this.#internal = createServer((socket) => options.serveHere(socket));
    this.#stopWatching = [options.state.routes.watch(() => this.#pushCatalog()), options.graphs.watch(() => this.#pushCatalog())];
  }

  static async start(options: FrontDoorOptions): Promise<FrontDoor> {
    const door = new FrontDoor(options);
    await new Promise<void>((resolve, reject) => door.#internal.once('error', reject).listen(0, '127.0.0.1', resolve));
    const address = door.#internal.address();
    door.#internalPort = typeof address === 'object' && address ? address.port : 0;
    for (let i = 0; i < options.workers; i++) door.#spawn(i, 0);
    return door;
  }

  /** The loopback port where the head serves requests relayed to it (by workers, and by replicas serving HTTP). */
  get relayPort(): number {
    return this.#internalPort;
  }

  /** Hands `socket` (whose first bytes, `head`, were read here) to the next ready worker; false if none is. */
  take(socket: Socket, head: Buffer): boolean {
    return this.#handTo(this.#nextReady(), { type: 'connection', head }, socket);
  }

  /**
   * Hands a connection the head's accept loop took (its descriptor: nothing read of it, the
   * request's bytes still in the kernel) to the next ready worker; false if none is (the caller
   * serves it here).
   */
  takeDescriptor(fd: number): boolean {
    const worker = this.#nextReady();
    if (!worker) return false;
    if (worker.link < 0) return this.#handTo(worker, { type: 'connection', head: Buffer.alloc(0) }, socketOverDescriptor(fd));
    worker.waiting.push({ fd, head: Buffer.alloc(0) });
    this.#pass(worker);
    return true;
  }

  /** Connections the workers hold, as they last reported them (for the head's connection cap). */
  get connections(): number {
    return this.#workers.reduce((n, w) => n + w.connections, 0);
  }

  /** When the oldest unproven connection any worker holds came (ms since the epoch), if any holds one. */
  get oldestUnproven(): number | undefined {
    let oldest: number | undefined;
    for (const w of this.#workers) if (w.unproven > 0 && (oldest === undefined || w.oldestUnproven < oldest)) oldest = w.oldestUnproven;
    return oldest;
  }

  /**
   * Asks the worker holding the oldest unproven HTTP connection (slow or silent: no whole request
   * head yet), if it came before `before` (ms since the epoch), to close it, making room under the
   * head's cap; false if no worker holds one that old. The counts are taken down at once so that
   * the next new connection does not count the same one; the worker's next report sets them right.
   */
  evictSlow(before: number): boolean {
    let oldest: Worker | undefined;
    for (const w of this.#workers)
      if (w.child.connected && w.unproven > 0 && w.oldestUnproven < before && (!oldest || w.oldestUnproven < oldest.oldestUnproven))
        oldest = w;
    if (!oldest) return false;
    oldest.unproven--;
    oldest.connections--;
    this.#send(oldest, { type: 'evict' });
    return true;
  }

  /** Whether a worker is ready to take a connection now. */
  get serving(): boolean {
    return !this.#closing && this.#workers.some((w) => w.ready && w.child.connected);
  }

  /** Hands a connection of the head's own (inference-forward.ts), nothing read of it yet, to the next ready worker; false if none is. */
  takeUnread(socket: Socket): boolean {
    return this.#handTo(this.#nextReady(), { type: 'connection', head: Buffer.alloc(0) }, socket);
  }

  /** Hands a connection to the gRPC port (nothing read of it yet) to the next ready worker; false if none is, or workers serve no gRPC. */
  takeGrpc(socket: Socket): boolean {
    if (this.#options.settings.grpcRelayPort === undefined) return false;
    return this.#handTo(this.#nextReady(), { type: 'grpc-connection' }, socket);
  }

  #nextReady(): Worker | undefined {
    // A stopping head keeps new connections: its workers are about to go, and a socket queued to
    // one that exits before taking it would never be answered (nor released).
    if (this.#closing) return undefined;
    for (let tried = 0; tried < this.#workers.length; tried++) {
      const worker = this.#workers[this.#next++ % this.#workers.length];
      if (worker?.ready && worker.child.connected) return worker;
    }
    return undefined;
  }

  #handTo(
    worker: Worker | undefined,
    message: { type: 'connection'; head: Buffer } | { type: 'grpc-connection' },
    socket: Socket,
  ): boolean {
    if (!worker) return false;
    // Node tracks a server's socket sent to a child (net.Server#_setupWorker) and asks that child
    // for its count on server.close(); once every such child has exited (the head stops its workers
    // before its HTTP server), close() never calls back. A socket without its `server` is sent
    // untracked, and destroying it once sent (the descriptor has gone with the message) ends the
    // server's count of it.
    (socket as Socket & { server: unknown }).server = null;
    if (message.type === 'connection' && worker.link >= 0 && descriptorOf(socket) !== undefined) {
      worker.waiting.push({ socket, head: message.head });
      this.#pass(worker);
      return true;
    }
    this.#sendWithIpc(worker, message, socket);
    return true;
  }

  /** Node's way: the socket with the message, one at a time (each waits for the worker's acknowledgement). */
  #sendWithIpc(worker: Worker, message: { type: 'connection'; head: Buffer } | { type: 'grpc-connection' }, socket: Socket): void {
    // What the worker was told before this socket comes first.
    this.#flush(worker);
    worker.child.send(message, socket, { keepOpen: false }, () => socket.destroy());
  }

  /**
   * Queues the waiting connections' descriptors on the worker's handoff socket, in order, and tells
   * the worker of each. When the socket's kernel buffer is full (a burst of new connections: each
   * descriptor in flight holds a few hundred bytes of it), the rest wait here and go a millisecond
   * later, as the worker takes them. Sent Node's way instead, each would wait for the worker's
   * acknowledgement of the one before: under a slowloris burst, most of the head's time writing to
   * its worker. Their number is bounded by the head's connection cap, which counts them as its own.
   */
  #pass(worker: Worker): void {
    while (worker.waiting.length > 0) {
      const waiting = worker.waiting[0]!;
      const fd = 'fd' in waiting ? waiting.fd : waiting.socket.destroyed ? undefined : descriptorOf(waiting.socket);
      if (fd === undefined) {
        worker.waiting.shift();
        continue;
      }
      let sent: boolean;
      try {
        sent = this.#addon!.send(worker.link, fd);
      } catch (err) {
        // Most often the worker died (a broken pipe) before its exit was seen: sent Node's way to
        // it, the waiting connections were lost. The head serves them, and later ones go Node's way.
        this.#options.log.warn(
          { pid: worker.child.pid, err: (err as Error).message },
          'front-door handoff socket failed: the head serves the connections that waited; later ones go with IPC messages',
        );
        this.#closeLink(worker);
        this.#takeBackWaiting(worker);
        return;
      }
      if (!sent) {
        worker.retry ??= setTimeout(() => {
          worker.retry = undefined;
          this.#pass(worker);
        }, 1);
        return;
      }
      worker.waiting.shift();
      // Counted at once against the head's cap; the worker's next report sets it right.
      worker.connections++;
      this.#send(worker, { type: 'connection', head: waiting.head as Uint8Array<ArrayBuffer>, queued: true });
      // This process's descriptor closes; the connection lives on in the worker's.
      if ('fd' in waiting) this.#addon!.close(fd);
      else waiting.socket.destroy();
    }
  }

  /** Connections that waited for a worker that is gone: served here (or closed, when the head stops). */
  #takeBackWaiting(worker: Worker): void {
    clearTimeout(worker.retry);
    worker.retry = undefined;
    for (const waiting of worker.waiting.splice(0)) {
      const socket = 'fd' in waiting ? socketOverDescriptor(waiting.fd) : waiting.socket;
      if (this.#closing || socket.destroyed) socket.destroy();
      else this.#options.serveHere(socket, waiting.head);
    }
  }

  /** Connects to the handoff socket a worker named in `ready`, and tells it to take the connection. */
  #openLink(worker: Worker, name: string | undefined): void {
    if (!this.#addon || name === undefined) return;
    try {
      worker.link = this.#addon.connect(name);
    } catch (err) {
      return void this.#options.log.warn(
        { pid: worker.child.pid, err: (err as Error).message },
        "cannot reach a front-door worker's handoff socket",
      );
    }
    this.#send(worker, { type: 'handoffOpen', headPid: process.pid });
  }

  #closeLink(worker: Worker): void {
    if (worker.link >= 0) this.#addon?.close(worker.link);
    worker.link = -1;
  }

  /** Tells every worker to finish its accepted requests and refuse new ones; resolves when all did or `timeoutMs` passed. */
  async drain(timeoutMs: number): Promise<void> {
    // A worker that ends while the head stops is not replaced.
    this.#closing = true;
    const waits = this.#workers.map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (!worker.child.connected) return resolve();
          worker.drained = resolve;
          this.#send(worker, { type: 'drain' });
        }),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(waits), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Stops every worker (SIGTERM, then SIGKILL after a second) and the internal port. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const stop of this.#stopWatching) stop();
    const exits = this.#workers.map((worker) => {
      const { child } = worker;
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 1000);
      return exited.finally(() => clearTimeout(timer));
    });
    await Promise.all(exits);
    this.#internal.close();
  }

  #spawn(slot: number, backoffMs: number): void {
    const child = fork(WORKER_SCRIPT, [], {
      serialization: 'advanced',
      execArgv: childNodeArgs(),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const worker: Worker = {
      child,
      ready: false,
      connections: 0,
      unproven: 0,
      oldestUnproven: Infinity,
      link: -1,
      outbox: [],
      waiting: [],
      retry: undefined,
    };
    this.#workers[slot] = worker;
    const started = Date.now();
    child.on('message', (raw, handle) => this.#received(worker, raw, handle as Socket | undefined));
    child.on('error', (err) => this.#options.log.warn({ err: err.message, pid: child.pid }, 'front-door worker error'));
    child.once('exit', (code, signal) => {
      worker.ready = false;
      this.#takeBackWaiting(worker);
      this.#closeLink(worker);
      worker.connections = 0;
      worker.unproven = 0;
      worker.drained?.();
      if (this.#closing) return;
      // A worker that ran a while before dying starts again at once; one that keeps dying waits longer each time.
      const next = Date.now() - started > 10_000 ? 0 : Math.min(MAX_BACKOFF_MS, Math.max(100, backoffMs * 2));
      this.#options.log.warn({ pid: child.pid, code, signal, restartInMs: next }, 'front-door worker exited; starting another');
      setTimeout(() => this.#closing || this.#spawn(slot, next), next).unref();
    });
    this.#send(worker, { type: 'init', settings: { ...this.#options.settings, internalPort: this.#internalPort } });
  }

  #received(worker: Worker, raw: unknown, socket: Socket | undefined): void {
    const parsed = WorkerToHeadSchema.safeParse(raw);
    if (!parsed.success) {
      this.#options.log.warn(
        { pid: worker.child.pid, issue: parsed.error.issues[0]?.message },
        'dropped a malformed message from a front-door worker',
      );
      return;
    }
    const message = parsed.data;
    const { state } = this.#options;
    switch (message.type) {
      case 'ready':
        this.#openLink(worker, message.handoff);
        this.#send(worker, { type: 'catalog', targets: this.#targets() });
        worker.ready = true;
        return;
      case 'lookup': {
        this.#send(worker, { type: 'target', id: message.id, target: lookupTarget(state, this.#options.graphs, message.name) ?? null });
        return;
      }
      case 'report':
        if (message.connections !== undefined) worker.connections = message.connections;
        if (message.unproven !== undefined) worker.unproven = message.unproven;
        if (message.unproven !== undefined) worker.oldestUnproven = message.oldestUnproven ?? Infinity;
        for (const [name, count] of Object.entries(message.served))
          state.metrics.frontDoorRequests.inc({ model: name, outcome: 'ok' }, count);
        for (const [name, codes] of Object.entries(message.failed)) {
          const stats = state.deployments.get(name)?.stats;
          for (const [code, count] of Object.entries(codes)) {
            if (!count) continue;
            stats?.recordFailures(code as ErrorCode, count);
            state.metrics.frontDoorRequests.inc({ model: name, outcome: code }, count);
          }
        }
        for (const { method, outcome, count } of message.grpc ?? []) state.metrics.grpcRequests.inc({ method, outcome }, count);
        return;
      case 'drained':
        worker.drained?.();
        return;
      case 'return':
        if (socket) this.#options.serveHere(socket, Buffer.from(message.head.buffer, message.head.byteOffset, message.head.byteLength));
        return;
    }
  }

  #targets() {
    return allTargets(this.#options.state, this.#options.graphs);
  }

  #pushCatalog(): void {
    const targets = this.#targets();
    const text = JSON.stringify(targets);
    if (text === this.#catalog) return;
    this.#catalog = text;
    for (const worker of this.#workers) if (worker.ready) this.#send(worker, { type: 'catalog', targets });
  }

  /** Queues `message` for the worker; the queue is written once this turn of the event loop is over. */
  #send(worker: Worker, message: HeadToWorker): void {
    if (worker.outbox.push(message) === 1) setImmediate(() => this.#flush(worker));
  }

  #flush(worker: Worker): void {
    const messages = worker.outbox.splice(0);
    if (messages.length === 0 || !worker.child.connected) return;
    worker.child.send(messages.length === 1 ? messages[0]! : { type: 'batch', messages }, (err) =>
      err ? this.#options.log.debug({ err: err.message }, 'front-door worker gone') : undefined,
    );
  }
}
