import { TroupeError, newId, newSecret } from '../runtime/index.js';
import type { ActorStats, DeploymentView, Logger, ModelDeployment, ModelMetadata, WireError } from '../runtime/index.js';
import type { ActorLink } from './actor-link.js';
import { DeploymentStats } from './deployment-stats.js';
import { Dispatcher } from './dispatcher.js';
import { place } from './scheduler.js';
import type { ActorRecord, ClusterState, DeploymentRecord, NodeRecord } from './state.js';

export interface ControllerOptions {
  /** Crashes allowed inside `restartWindowMs` before an actor is DEAD (default 5 in 10 min). */
  maxRestarts: number;
  restartWindowMs: number;
  /** Time an actor gets to finish in-flight work when stopped. */
  drainMs: number;
}

export const DEFAULT_CONTROLLER_OPTIONS: ControllerOptions = { maxRestarts: 5, restartWindowMs: 600_000, drainMs: 10_000 };

interface Waiter {
  resolve: (view: DeploymentView) => void;
  reject: (err: TroupeError) => void;
}

export interface ActorExitReport {
  code: number | null;
  signal: string | null;
  stderrTail: string;
  killedBecause?: string | undefined;
}

/** Changes an actor cannot take while running: everything it was started with. */
function needsNewActors(old: ModelDeployment, next: ModelDeployment): boolean {
  return (
    old.model !== next.model ||
    old.gpus !== next.gpus ||
    old.cpus !== next.cpus ||
    old.threads !== next.threads ||
    old.memory !== next.memory ||
    JSON.stringify(old.batch) !== JSON.stringify(next.batch)
  );
}

function newDeployment(spec: ModelDeployment): DeploymentRecord {
  const d = { spec, actors: [], metadata: null, unhealthy: null, stats: new DeploymentStats() } as unknown as DeploymentRecord;
  d.dispatcher = new Dispatcher(d);
  return d;
}

function lastLines(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

/**
 * Drives deployments toward what users asked for: creates actors, places them on nodes, restarts
 * crashed ones with back-off, and stops the ones no longer wanted. All state changes go through
 * here so the reasons shown to people stay consistent.
 */
export class Controller {
  readonly #state: ClusterState;
  readonly #log: Logger;
  readonly #options: ControllerOptions;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(state: ClusterState, log: Logger, options: Partial<ControllerOptions> = {}) {
    this.#state = state;
    this.#log = log;
    this.#options = { ...DEFAULT_CONTROLLER_OPTIONS, ...options };
  }

  /** Creates or updates a deployment; resolves when every replica is READY. */
  deploy(spec: ModelDeployment): Promise<DeploymentView> {
    const existing = this.#state.deployments.get(spec.name);
    if (existing && needsNewActors(existing.spec, spec)) {
      // A different model or resource shape needs new actors; retire all the old ones.
      for (const a of existing.actors) this.#retire(a);
      existing.actors = [];
      existing.metadata = null;
    }
    const d: DeploymentRecord = existing ?? newDeployment(spec);
    d.spec = spec;
    d.unhealthy = null;
    this.#state.deployments.set(spec.name, d);
    const live = d.actors.filter((a) => a.state !== 'DEAD');
    for (let i = live.length; i < spec.replicas; i++) d.actors.push(this.#newActor(d, this.#freeReplicaIndex(d)));
    for (const a of live.slice(spec.replicas)) this.#retire(a);
    d.actors = d.actors.filter((a) => a.state !== 'DRAINING');
    this.#log.info({ deployment: spec.name, replicas: spec.replicas, model: spec.model }, 'deployment changed');
    this.#state.events.add('deployment-changed', `${spec.name}: ${spec.replicas} replica(s) of ${spec.model}`);
    const done = new Promise<DeploymentView>((resolve, reject) => {
      const set = this.#waiters.get(spec.name) ?? new Set();
      set.add({ resolve, reject });
      this.#waiters.set(spec.name, set);
    });
    this.schedule();
    this.#checkReady(d);
    return done;
  }

  /** A deployment as users see it now. */
  view(name: string): DeploymentView {
    const d = this.#state.deployments.get(name);
    if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${name}'`);
    return this.#state.deploymentView(d);
  }

  /** Stops a deployment's actors (each finishes its in-flight calls first) and forgets it. */
  async undeploy(name: string): Promise<void> {
    const d = this.#state.deployments.get(name);
    if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${name}'`);
    this.#state.deployments.delete(name);
    const removed = new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `deployment '${name}' was removed`);
    this.#settleWaiters(name, removed);
    d.dispatcher.failAll(removed);
    this.#state.events.add('deployment-removed', `${name} removed; draining ${d.actors.length} actor(s)`);
    await Promise.all(d.actors.map((a) => this.#retire(a)));
    this.schedule();
  }

  /** Places every PENDING actor that now fits; the rest keep a reason a person can act on. */
  schedule(): void {
    for (const d of this.#state.deployments.values()) {
      for (const a of d.actors) {
        if (a.state !== 'PENDING') continue;
        const placement = place(
          { cpus: d.spec.cpus, gpus: d.spec.gpus, memoryBytes: d.spec.memory ?? 0 },
          d.spec.name,
          this.#state.nodes.values(),
          this.#state.actors.values(),
          d.spec.placement,
        );
        if (!placement.ok) {
          a.reason = placement.reason;
          continue;
        }
        a.nodeId = placement.node.id;
        a.gpus = placement.gpus;
        a.gpuShare = placement.gpuShare;
        a.device = a.gpus.length === 0 ? 'cpu' : `gpu:${a.gpus.join(',')}`;
        a.state = 'STARTING';
        a.reason = null;
        this.#start(a, d, placement.node);
      }
    }
  }

  /** The lowest replica number not in use, so names stay short and stable across scaling. */
  #freeReplicaIndex(d: DeploymentRecord): number {
    const used = new Set(d.actors.filter((a) => a.state !== 'DEAD' && a.state !== 'DRAINING').map((a) => Number(a.name.split('#')[1])));
    let i = 0;
    while (used.has(i)) i++;
    return i;
  }

  #newActor(d: DeploymentRecord, replica: number): ActorRecord {
    const a: ActorRecord = {
      id: newId(),
      name: `${d.spec.name}#${replica}`,
      deployment: d.spec.name,
      state: 'PENDING',
      reason: 'waiting for placement',
      nodeId: null,
      gpus: [],
      gpuShare: 1,
      cpus: d.spec.cpus,
      device: 'cpu',
      pid: null,
      restarts: 0,
      recentCrashes: [],
      secret: newSecret(),
      link: undefined,
      visibleDevices: null,
      gpuMemoryMiB: null,
      memoryBytes: d.spec.memory ?? 0,
      stats: null,
      usage: null,
    };
    this.#state.actors.set(a.id, a);
    return a;
  }

  #start(a: ActorRecord, d: DeploymentRecord, node: NodeRecord): void {
    const channel = node.channel;
    if (!channel) return;
    a.secret = newSecret();
    channel
      .request(
        {
          type: 'startActor',
          actorId: a.id,
          secret: a.secret,
          model: d.spec.model,
          gpus: a.gpus,
          ...(d.spec.threads !== undefined ? { threads: d.spec.threads } : {}),
          batch: d.spec.batch,
          ...(d.spec.kind === 'fn' ? { kind: 'fn' as const, fn: d.spec.model } : {}),
        },
        30_000,
      )
      .then(
        (value) => {
          const pid = (value as { pid?: unknown } | undefined)?.pid;
          if (typeof pid === 'number' && a.state === 'STARTING') a.pid = pid;
        },
        (err: unknown) => {
          const error = err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err));
          this.#fail(a, error);
        },
      );
  }

  /** The actor's process could not start or load its model: retrying will not help. */
  #fail(a: ActorRecord, error: TroupeError): void {
    a.state = 'DEAD';
    a.reason = error.message;
    const d = this.#state.deployments.get(a.deployment);
    if (!d || !d.actors.includes(a)) return;
    d.dispatcher.pump();
    d.unhealthy = error.message;
    this.#log.warn({ actor: a.name, code: error.code, reason: error.message }, 'actor failed to start');
    this.#state.events.add('actor-dead', `${a.name} failed to start: ${error.message}`);
    this.#settleWaiters(d.spec.name, error);
  }

  /** An actor process joined the data plane; returns its record if the secret is right. */
  authenticateActor(actorId: string, secret: string): ActorRecord | undefined {
    const a = this.#state.actors.get(actorId);
    if (!a || a.secret !== secret || a.state !== 'STARTING') return undefined;
    return a;
  }

  actorReady(a: ActorRecord, link: ActorLink, metadata: ModelMetadata, visibleDevices: string): void {
    const d = this.#state.deployments.get(a.deployment);
    if (!d || a.state !== 'STARTING') {
      link.close('not wanted');
      return;
    }
    a.link = link;
    a.visibleDevices = visibleDevices;
    a.state = 'READY';
    a.reason = null;
    d.metadata = metadata;
    this.#log.info({ actor: a.name, node: this.#state.nodeName(a.nodeId), device: a.device, pid: a.pid }, 'actor ready');
    this.#state.events.add('actor-ready', `${a.name} READY on ${this.#state.nodeName(a.nodeId)} (${a.device}, pid ${a.pid})`);
    this.#checkReady(d);
    d.dispatcher.pump();
  }

  /** An actor's running totals; the deployment's monotonic counters take the increase. */
  actorStats(a: ActorRecord, stats: ActorStats): void {
    this.#state.deployments.get(a.deployment)?.stats.absorb(a.stats, stats);
    a.stats = stats;
  }

  actorLoadFailed(a: ActorRecord, error: WireError): void {
    this.#fail(a, new TroupeError(error.code, error.message));
  }

  /** The agent saw an actor process exit. Wanted actors restart with back-off. */
  actorExited(actorId: string, exit: ActorExitReport): void {
    const a = this.#state.actors.get(actorId);
    if (!a) return;
    a.link = undefined;
    a.pid = null;
    a.visibleDevices = null;
    a.gpuMemoryMiB = null;
    const how = exit.killedBecause ?? `exited with ${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`}`;
    const cause = `${how}${exit.stderrTail ? `: ${lastLines(exit.stderrTail, 5)}` : ''}`;
    if (a.state === 'DRAINING' || a.state === 'DEAD') {
      this.#state.actors.delete(a.id);
      if (a.state === 'DEAD' && exit.stderrTail && a.reason && !a.reason.includes('exited')) a.reason += ` (${cause})`;
      this.schedule();
      return;
    }
    this.#crashed(a, cause);
  }

  /**
   * A node is gone: its actors are placed elsewhere. A node that `left` on purpose costs its actors
   * no restart budget; a `lost` one counts as a crash of each.
   */
  nodeLost(node: NodeRecord, how: 'left' | 'lost'): void {
    for (const a of this.#state.actors.values()) {
      if (a.nodeId !== node.id) continue;
      a.link?.close(`node ${how}`);
      a.link = undefined;
      a.pid = null;
      if (a.state === 'DRAINING') this.#state.actors.delete(a.id);
      else if (a.state === 'DEAD') continue;
      else if (how === 'lost') this.#crashed(a, `node ${node.name} was lost`);
      else {
        a.nodeId = null;
        a.gpus = [];
        a.state = 'PENDING';
        a.reason = `node ${node.name} left; waiting for placement`;
      }
    }
    this.schedule();
  }

  #crashed(a: ActorRecord, cause: string): void {
    // Waiting calls fail now if no replica is left that could ever serve them.
    queueMicrotask(() => this.#state.deployments.get(a.deployment)?.dispatcher.pump());
    const now = Date.now();
    a.recentCrashes = [...a.recentCrashes.filter((t) => now - t < this.#options.restartWindowMs), now];
    a.nodeId = null;
    a.gpus = [];
    if (a.recentCrashes.length > this.#options.maxRestarts) {
      a.state = 'DEAD';
      a.reason = `${cause}; gave up after ${this.#options.maxRestarts} restarts in ${Math.round(this.#options.restartWindowMs / 1000)} s`;
      const d = this.#state.deployments.get(a.deployment);
      if (d) {
        d.unhealthy = `${a.name} is DEAD: ${a.reason}`;
        this.#settleWaiters(d.spec.name, new TroupeError('TROUPE_ERR_ACTOR_DIED', d.unhealthy));
      }
      this.#log.error({ actor: a.name, cause }, 'actor is DEAD');
      this.#state.events.add('actor-dead', `${a.name} DEAD: ${a.reason}`);
      return;
    }
    a.state = 'RESTARTING';
    a.reason = cause;
    a.restarts++;
    const delay = Math.min(100 * 2 ** (a.recentCrashes.length - 1), 30_000);
    this.#log.warn({ actor: a.name, cause, restartInMs: delay, restarts: a.restarts }, 'actor crashed; restarting');
    this.#state.events.add('actor-crashed', `${a.name} ${cause.split('\n')[0]}; restart ${a.restarts} in ${delay} ms`);
    this.#later(delay, () => {
      if (a.state !== 'RESTARTING') return;
      a.state = 'PENDING';
      a.reason = 'waiting for placement after a restart';
      this.schedule();
    });
  }

  /** Takes an actor out of service; it finishes in-flight calls, then its process stops. */
  #retire(a: ActorRecord): Promise<void> {
    const node = a.nodeId ? this.#state.nodes.get(a.nodeId) : undefined;
    if (!node?.channel || a.state === 'PENDING' || a.state === 'RESTARTING' || a.state === 'DEAD') {
      this.#state.actors.delete(a.id);
      return Promise.resolve();
    }
    // The router only picks READY replicas, so DRAINING takes no new calls; the ones it holds
    // finish before the process is told to stop.
    a.state = 'DRAINING';
    a.reason = 'finishing in-flight calls before stopping';
    const started = Date.now();
    return (a.link?.whenIdle(this.#options.drainMs) ?? Promise.resolve())
      .then(() => {
        const graceMs = Math.max(1000, this.#options.drainMs - (Date.now() - started));
        return node.channel?.request({ type: 'stopActor', actorId: a.id, graceMs }, graceMs + 5000);
      })
      .then(
        () => undefined,
        () => undefined,
      );
  }

  #checkReady(d: DeploymentRecord): void {
    const ready = d.actors.filter((a) => a.state === 'READY').length;
    if (ready >= d.spec.replicas) this.#settleWaiters(d.spec.name, this.#state.deploymentView(d));
  }

  #settleWaiters(name: string, outcome: DeploymentView | TroupeError): void {
    const set = this.#waiters.get(name);
    if (!set) return;
    this.#waiters.delete(name);
    for (const w of set) outcome instanceof TroupeError ? w.reject(outcome) : w.resolve(outcome);
  }

  #later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    for (const name of [...this.#waiters.keys()]) this.#settleWaiters(name, new TroupeError('TROUPE_ERR_SHUTTING_DOWN', 'the head is shutting down'));
  }
}
