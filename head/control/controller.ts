import { TroupeError } from '../../runtime/internal.js';
import type { ActorStats, DeploymentView, ErrorCode, Logger, ModelDeployment, ModelMetadata, WireError } from '../../runtime/internal.js';
import { DEFAULT_CONTROLLER_OPTIONS } from './controller-options.js';
import type { ActorExitReport, ControllerOptions } from './controller-options.js';
import { systemClock } from './clock.js';
import type { Clock, ClockTimer } from './clock.js';
import type { DurableStore, SavedState } from '../state/durable.js';
import { ReadyWaiters } from './ready-waiters.js';
import {
  describeExit,
  freeReplicaIndices,
  markReady,
  needsNewActors,
  newActorRecord,
  newDeployment,
  returnToPending,
  snapshotState,
} from '../state/record-changes.js';
import { isRefusal, refuseStartsFromZero, refusalOutcome, refusedError } from './refused-deploy.js';
import { ActorsByNode } from './actors-by-node.js';
import { placeDeployment } from './place-deployment.js';
import { dropSuperseded, retireSuperseded, shouldMakeRoom, supersede, unsupersede } from './surge.js';
import { MemoryReservations } from './memory-estimate.js';
import { restoreSaved } from './restore-saved.js';
import { noteFreshInstance, recordCrash } from './restart-policy.js';
import { retireActor } from './retire.js';
import { startOnNode } from './start-actor.js';
import { ownReplicas, versionDeploymentName } from './versions.js';
import { keepChosenReplicas, leavesChosenReplicas, replicasAsked } from './replicas-at-load.js';
import { NodeMembership } from './node-membership.js';
import { SchedulingTurns } from './scheduling-turns.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { HeadActorLink, ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';

/**
 * Drives deployments toward what users asked for: creates actors, places them on nodes, restarts
 * crashed ones with back-off, and stops the ones no longer wanted. All state changes go through
 * here (node registrations, heartbeats and silence too) so the reasons shown to people stay
 * consistent. Its effects go through ports: each node's AgentLink (agent-link.ts) and a {@link Clock}.
 */
export class Controller {
  readonly #state: ClusterState;
  readonly #log: Logger;
  readonly #options: ControllerOptions;
  readonly #waiters = new ReadyWaiters();
  readonly #clock: Clock;
  readonly #timers = new Set<ClockTimer>();
  readonly #store: DurableStore | undefined;
  /** Actors whose process is known to run already (restored, or reconnecting): their `ready` is a rejoin. */
  readonly #rejoining = new WeakSet<ActorRecord>();
  readonly #memory: MemoryReservations;
  readonly #turns: SchedulingTurns;
  /** When each actor's data-plane socket last closed, so a stale grace timer can tell. */
  readonly #disconnectedSince = new WeakMap<ActorRecord, number>();
  /** Agents, heartbeats and liveness: node state changes and what they do to actors. */
  readonly nodes: NodeMembership;

  constructor(state: ClusterState, log: Logger, options: Partial<ControllerOptions> = {}, store?: DurableStore) {
    this.#state = state;
    this.#log = log;
    this.#options = { ...DEFAULT_CONTROLLER_OPTIONS, ...options };
    this.#clock = options.clock ?? systemClock;
    this.#memory = new MemoryReservations(this.#options.modelBytes);
    this.#turns = new SchedulingTurns(this.#options.scheduleSliceMs, () => this.schedule());
    this.#store = store;
    store?.track(() => snapshotState(this.#state));
    this.nodes = new NodeMembership(state, log, this.#clock, {
      crashed: (a, cause) => this.#crashed(a, cause),
      replace: (a, why) => this.#replace(a, why),
      schedule: () => this.schedule(),
      dirty: () => this.#dirty(),
    });
  }

  /** Specs or actors changed: the store coalesces state-file writes, the route book client pushes. */
  #dirty(): void {
    this.#store?.markDirty();
    this.#state.routes.changed();
  }

  /**
   * Rebuilds deployments from a restarted head's state file. Actors that were running come back
   * STARTING, waiting for their node: when its agent re-registers and lists them they are adopted
   * (same process, model not reloaded), and an actor that reconnects by itself with its secret is
   * READY again as soon as it re-sends `ready`. Those whose node does not return within
   * `adoptGraceMs` are placed anew; replicas with no saved actor are created PENDING.
   */
  restore(saved: SavedState): void {
    for (const a of restoreSaved(saved, this.#state, this.#memory)) this.#rejoining.add(a);
    const adopting = [...this.#state.actors.values()].filter((a) => a.awaitingNode).length;
    if (saved.deployments.length > 0) {
      this.#log.info({ deployments: saved.deployments.length, adopting }, 'restored deployments from the state file');
      this.#state.events.add('head-restored', `restored ${saved.deployments.length} deployment(s); ${adopting} running actor(s) to adopt`);
    }
    this.#later(this.#options.adoptGraceMs, () => {
      for (const a of this.#state.actors.values()) {
        if (!a.awaitingNode || a.nodeId !== null || a.state !== 'STARTING') continue;
        this.#replace(
          a,
          `node ${a.awaitingNode} did not reconnect within ${Math.round(this.#options.adoptGraceMs / 1000)} s of a head restart`,
        );
      }
      this.schedule();
    });
    this.#dirty();
  }

  /** An actor that will not be adopted: placed anew as a fresh process (a new secret shuts the old one out). */
  #replace(a: ActorRecord, why: string): void {
    if (a.superseded) dropSuperseded(this.#state, a);
    else returnToPending(a, why);
    this.#dirty();
  }

  /**
   * Creates or updates a deployment; resolves when every replica is READY. A deploy refused for
   * what it asks (see refused-deploy.ts) changes nothing: a new deployment is removed again, an
   * update goes back to the spec it replaced, and the state file says so before the caller hears.
   */
  deploy(asked: ModelDeployment): Promise<DeploymentView> {
    const existing = this.#state.deployments.get(asked.name);
    const spec = keepChosenReplicas(existing?.spec, asked);
    const previous = existing?.spec ?? null;
    const d = this.#apply(spec, existing);
    this.#log.info({ deployment: spec.name, replicas: spec.replicas, model: spec.model }, 'deployment changed');
    this.#state.events.add('deployment-changed', `${spec.name}: ${spec.replicas} replica(s) of ${spec.model}`);
    const done = this.#waiters.wait(spec.name, previous);
    this.schedule();
    this.#checkReady(d);
    return done;
  }

  /** Makes `spec` what deployment `spec.name` wants: actors added, replaced or retired to match. */
  #apply(spec: ModelDeployment, existing: DeploymentRecord | undefined): DeploymentRecord {
    // A split deployment runs no replica of its own: its `model` (its first version's) changing on
    // a promotion or rollback, or its becoming one model again, retires nothing, and the signature
    // its callers are checked against stays until a replica says another (clearing it failed the
    // calls of a promotion, and those made while the one model's replicas started).
    const wasSplit = existing?.spec.versions !== undefined;
    if (existing && !wasSplit && !spec.versions && (needsNewActors(existing.spec, spec) || leavesChosenReplicas(existing, spec))) {
      // A different model or resource shape needs new actors. The READY ones serve on until the
      // new ones are READY (#checkReady retires them then), so an update drops no call, and a
      // refused one leaves them serving as they were (#deployFailed); the rest go now.
      supersede(existing, (a) => void this.#retire(a));
    }
    const d: DeploymentRecord = existing ?? newDeployment(spec, this.#memory.reserve(spec));
    d.spec = spec;
    // A split takes the signature of a version that already serves (one model's replicas becoming
    // versions: those are READY first, deployments.ts); its own replicas retire below.
    const serving = spec.versions
      ?.map((v) => this.#state.deployments.get(versionDeploymentName(spec.name, v.version)))
      .find((v) => v?.metadata);
    if (serving) {
      d.metadata = serving.metadata;
      d.labelLines = serving.labelLines ?? d.labelLines;
    }
    d.memoryReserved = this.#memory.reserve(spec);
    d.unhealthy = null;
    this.#state.deployments.set(spec.name, d);
    const live = d.actors.filter((a) => a.state !== 'DEAD' && !a.superseded);
    const replicas = ownReplicas(spec);
    for (const i of freeReplicaIndices(d, replicas - live.length)) d.actors.push(this.#addActor(newActorRecord(d, i)));
    for (const a of live.slice(replicas)) void this.#retire(a);
    d.actors = d.actors.filter((a) => a.state !== 'DRAINING');
    this.#dirty();
    return d;
  }

  /**
   * The deploys waiting on `d` fail with `error`. A refusal is undone first, and the answer waits
   * until the state file no longer holds what was refused, so a crash right after it cannot bring
   * that back.
   */
  #deployFailed(d: DeploymentRecord, error: TroupeError): void {
    const name = d.spec.name;
    const before = this.#waiters.before(name);
    if (before === undefined || !isRefusal(error)) return this.#waiters.settle(name, error);
    const settle = this.#waiters.take(name);
    let outcome = refusalOutcome(before, d.spec);
    if (before && outcome === 'restarted' && d.actors.some((a) => a.superseded)) {
      // The replicas that never stopped serve on: the refused update changes nothing that ran.
      unsupersede(d, before, (a) => void this.#retire(a));
      d.memoryReserved = this.#memory.reserve(before);
      this.#dirty();
      this.#state.routes.changed();
      outcome = 'restored';
    } else if (before && outcome !== 'unchanged') {
      // The replicas that failed go; the spec that was in force is placed again.
      for (const a of d.actors.filter((x) => x.state === 'DEAD')) this.#state.actors.delete(a.id);
      d.actors = d.actors.filter((a) => a.state !== 'DEAD');
      this.#apply(before, d);
      this.schedule();
    }
    const refused = refusedError(error, name, before, outcome);
    if (before?.replicas === 0 && d.spec.autoscale) refuseStartsFromZero(d, refused, this.#clock.now());
    if (outcome === 'removed') void this.#forget(d, refused);
    this.#log.warn({ deployment: name, code: error.code }, refused.message);
    this.#state.events.add('deployment-refused', refused.message);
    void (this.#store?.flush() ?? Promise.resolve()).then(() => settle(refused));
  }

  /** Stops a deployment's actors (each finishes its in-flight calls first) and forgets it. */
  async undeploy(name: string): Promise<void> {
    const d = this.#state.deployments.get(name);
    if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${name}'`);
    const removed = new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `deployment '${name}' was removed`);
    this.#waiters.settle(name, removed);
    this.#state.events.add('deployment-removed', `${name} removed; draining ${d.actors.length} actor(s)`);
    await this.#forget(d, removed);
  }

  /** Removes a deployment: queued calls fail with `why`, its actors drain and stop. */
  async #forget(d: DeploymentRecord, why: TroupeError): Promise<void> {
    this.#state.deployments.delete(d.spec.name);
    this.#dirty();
    d.dispatcher.failAll(why);
    d.coldStart.fail(why);
    this.#state.metrics.forget(d.spec.name);
    await Promise.all(d.actors.map((a) => this.#retire(a)));
    this.schedule();
  }

  /**
   * Places every PENDING actor that now fits; the rest keep a reason a person can act on. A pass
   * that has used the turn's slice stops between deployments and goes on in a later turn
   * (scheduling-turns.ts), so a burst of deploys at thousands of nodes does not stall the head.
   */
  schedule(): void {
    if (this.#turns.due) return;
    const began = performance.now();
    // Grouped once per pass (not per placement), and kept current as this pass places actors;
    // the nodes are listed once too (a pass's placements rank them, see ActorsByNode.best).
    let byNode: ActorsByNode | undefined;
    let nodes: NodeRecord[] | undefined;
    try {
      for (const d of this.#state.deployments.values()) {
        if (!d.actors.some((a) => a.state === 'PENDING')) continue;
        if (this.#turns.spent(performance.now() - began, byNode !== undefined)) return;
        byNode ??= new ActorsByNode(this.#state.actors.values());
        nodes ??= [...this.#state.nodes.values()];
        placeDeployment(d, nodes, byNode, this.#state.metrics.placement, (a, node) => this.#start(a, d, node));
        // No room for an update's new replicas beside the old: the old make room where that gives it.
        if (shouldMakeRoom(d, nodes, this.#state.actors.values())) this.#retireSuperseded(d);
      }
    } finally {
      this.#turns.add(performance.now() - began, byNode !== undefined);
    }
  }

  #addActor(a: ActorRecord): ActorRecord {
    this.#state.actors.set(a.id, a);
    return a;
  }

  #start(a: ActorRecord, d: DeploymentRecord, node: NodeRecord): void {
    if (!node.agent) return;
    this.#rejoining.delete(a);
    startOnNode(a, d, node, {
      changed: () => this.#dirty(),
      // A lost agent connection (or an agent shutting down) says nothing about the model: try again.
      failed: (error) =>
        error.retryable ? this.#crashed(a, `could not start on ${node.name}: ${error.message}`, error.code) : this.#fail(a, error),
    });
  }

  /** The actor's process could not start or load its model: retrying will not help. */
  #fail(a: ActorRecord, error: TroupeError): void {
    a.state = 'DEAD';
    a.reason = error.message;
    this.#dirty();
    const d = this.#state.deployments.get(a.deployment);
    if (!d || !d.actors.includes(a)) return;
    d.dispatcher.pump();
    d.unhealthy = error.message;
    this.#log.warn({ actor: a.name, code: error.code, reason: error.message }, 'actor failed to start');
    this.#state.events.add('actor-dead', `${a.name} failed to start: ${error.message}`);
    this.#deployFailed(d, error);
  }

  actorReady(
    a: ActorRecord,
    link: HeadActorLink,
    metadata: ModelMetadata,
    visibleDevices: string,
    direct?: ActorRecord['direct'],
    modelBytes?: number,
    labelLines?: Record<string, string[]>,
  ): void {
    const d = this.#state.deployments.get(a.deployment);
    if (!d || (a.state !== 'STARTING' && a.state !== 'READY')) {
      link.close('not wanted');
      return;
    }
    // A second connection of the same process replaces the first: calls left on the old one fail
    // as ACTOR_DIED and are retried, instead of waiting on a socket nobody reads.
    if (a.link && a.link !== link) a.link.terminate('replaced by a new connection of the same actor');
    const rejoined = a.state === 'READY' || this.#rejoining.has(a);
    this.#rejoining.delete(a);
    if (d.spec.kind === 'class' && !rejoined) noteFreshInstance(a);
    const whole = d.spec.versionOf === undefined ? undefined : this.#state.deployments.get(d.spec.versionOf);
    markReady(a, d, whole, { link, metadata, visibleDevices, direct, labelLines });
    this.#memory.reported(d, a, modelBytes);
    const more = replicasAsked(a, d, [...this.#state.nodes.values()], this.#state.actors.values());
    if (more) {
      this.#log.info({ deployment: d.spec.name, replicas: more.replicas }, more.why);
      this.#state.events.add('scaled', `${d.spec.name}: ${d.spec.replicas} -> ${more.why}`);
      this.#apply({ ...d.spec, replicas: more.replicas }, d);
      this.schedule();
    }
    this.#log.info(
      { actor: a.name, node: this.#state.nodeName(a.nodeId) ?? a.awaitingNode, device: a.device, pid: a.pid, rejoined },
      'actor ready',
    );
    this.#state.events.add(
      rejoined ? 'actor-rejoined' : 'actor-ready',
      `${a.name} READY${rejoined ? ' again' : ''} on ${this.#state.nodeName(a.nodeId) ?? a.awaitingNode} (${a.device}, pid ${a.pid})`,
    );
    this.#dirty();
    this.#checkReady(d);
    d.dispatcher.pump();
  }

  /** An actor's running totals; the deployment's monotonic counters take the increase. */
  actorStats(a: ActorRecord, stats: ActorStats): void {
    this.#state.deployments.get(a.deployment)?.stats.absorb(a.stats, stats);
    a.stats = stats;
  }

  /**
   * An actor's data-plane socket closed. Its process may live on (a dropped connection, a head
   * that restarts): it reconnects by itself, and until it does it takes no calls. If it died
   * instead, its agent reports the exit. One that neither rejoins nor is reported gone within
   * `adoptGraceMs` is replaced: stopped through its agent (the exit restarts it), or placed
   * anew when no agent speaks for it.
   */
  actorDisconnected(a: ActorRecord, link: HeadActorLink): void {
    if (a.link !== link) return;
    a.link = undefined;
    if (a.state !== 'READY') return;
    a.state = 'STARTING';
    a.reason = 'reconnecting to the head';
    this.#rejoining.add(a);
    this.#state.routes.changed();
    const [secret, since] = [a.secret, this.#clock.now()];
    this.#disconnectedSince.set(a, since);
    queueMicrotask(() => this.#state.deployments.get(a.deployment)?.dispatcher.pump());
    this.#later(this.#options.adoptGraceMs, () => {
      // Rejoined, restarted or removed meanwhile, or disconnected again later: nothing to do here.
      if (a.link || a.state !== 'STARTING' || a.secret !== secret || this.#disconnectedSince.get(a) !== since) return;
      if (!this.#state.actors.has(a.id)) return;
      const why = `it did not reconnect within ${Math.round(this.#options.adoptGraceMs / 1000)} s`;
      const agent = a.nodeId ? this.#state.nodes.get(a.nodeId)?.agent : undefined;
      this.#log.warn({ actor: a.name, node: this.#state.nodeName(a.nodeId) }, `replacing an actor: ${why}`);
      if (agent) void agent.stopActor(a.id, 1000);
      else if (a.nodeId === null) {
        this.#replace(a, why);
        this.schedule();
      }
    });
  }

  actorLoadFailed(a: ActorRecord, error: WireError): void {
    this.#fail(a, new TroupeError(error.code, error.message));
  }

  /**
   * The agent of node `nodeId` saw an actor process exit. Wanted actors restart with back-off. An
   * exit reported by a node the actor no longer runs on is an old process (a duplicate stopped
   * after its node came back) and changes nothing.
   */
  actorExited(actorId: string, exit: ActorExitReport, nodeId?: string): void {
    const a = this.#state.actors.get(actorId);
    if (!a) return;
    if (nodeId !== undefined && a.nodeId !== nodeId) return;
    this.#dirty();
    a.link?.terminate('the actor process exited');
    a.link = undefined;
    a.pid = null;
    a.visibleDevices = null;
    a.gpuMemoryMiB = null;
    const cause = describeExit(exit);
    if (a.state === 'DRAINING' || a.state === 'DEAD') {
      this.#state.actors.delete(a.id);
      if (a.state === 'DEAD' && exit.stderrTail && a.reason && !a.reason.includes('exited')) a.reason += ` (${cause})`;
      this.schedule();
      return;
    }
    this.#crashed(a, cause);
  }

  /** `code`: what a deploy waiting on this actor fails with if it gives up (default ACTOR_DIED). */
  #crashed(a: ActorRecord, cause: string, code: ErrorCode = 'TROUPE_ERR_ACTOR_DIED'): void {
    this.#dirty();
    // Waiting calls fail now if no replica is left that could ever serve them.
    queueMicrotask(() => this.#state.deployments.get(a.deployment)?.dispatcher.pump());
    a.lastCrash = cause.split('\n')[0];
    const outcome = recordCrash(a, cause, this.#options, this.#clock.now(), this.#state.deployments.get(a.deployment)?.spec.maxRestarts);
    if (outcome.dead) {
      const d = this.#state.deployments.get(a.deployment);
      if (d) {
        d.unhealthy = `${a.name} is DEAD: ${a.reason}`;
        this.#deployFailed(d, new TroupeError(code, d.unhealthy));
      }
      this.#log.error({ actor: a.name, cause }, 'actor is DEAD');
      this.#state.events.add('actor-dead', `${a.name} DEAD: ${a.reason}`);
      return;
    }
    this.#log.warn({ actor: a.name, cause, restartInMs: outcome.delayMs, restarts: a.restarts }, 'actor crashed; restarting');
    this.#state.events.add('actor-crashed', `${a.name} ${cause.split('\n')[0]}; restart ${a.restarts} in ${outcome.delayMs} ms`);
    this.#later(outcome.delayMs, () => {
      if (a.state !== 'RESTARTING') return;
      a.state = 'PENDING';
      a.reason = 'waiting for placement after a restart';
      this.schedule();
    });
  }

  /** Takes an actor out of service; it finishes in-flight calls, then its process stops (retire.ts). */
  #retire(a: ActorRecord): Promise<void> {
    return retireActor(this.#state, a, this.#options.drainMs, () => this.#dirty(), this.#clock);
  }

  #checkReady(d: DeploymentRecord): void {
    const ready = d.actors.filter((a) => a.state === 'READY' && !a.superseded).length;
    if (ready < ownReplicas(d.spec)) return;
    this.#retireSuperseded(d);
    this.#waiters.settle(d.spec.name, this.#state.deploymentView(d));
  }

  #retireSuperseded(d: DeploymentRecord): void {
    if (!retireSuperseded(d, (a) => void this.#retire(a))) return;
    this.#dirty();
    this.#state.routes.changed();
  }

  #later(ms: number, fn: () => void): void {
    const timer = this.#clock.setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  close(): void {
    this.#turns.close();
    for (const t of this.#timers) this.#clock.clearTimeout(t);
    this.#timers.clear();
    this.#waiters.settleAll(new TroupeError('TROUPE_ERR_SHUTTING_DOWN', 'the head is shutting down'));
  }
}
