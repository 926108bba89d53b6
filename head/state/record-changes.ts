import { batchesByDefault, labelFilesOf, newId, newSecret, replicasChoosable, sameSecret } from '../../runtime/internal.js';
import type { HeadToAgent, ModelDeployment, ModelMetadata } from '../../runtime/internal.js';
import { DeploymentStats } from './deployment-stats.js';
import { ColdStart } from '../calls/cold-start.js';
import { Dispatcher } from '../calls/dispatcher.js';
import type { ActorExitReport } from '../control/controller-options.js';
import type { SavedActor } from './durable.js';
import type { ClusterState } from './cluster-state.js';
import type { ActorRecord, DeploymentRecord, HeadActorLink } from './records.js';

// How the controller's records are made, compared and saved: plain functions over cluster state.

/** Changes an actor cannot take while running: everything it was started with (each field `startActorMessage` passes from the spec). */
export function needsNewActors(old: ModelDeployment, next: ModelDeployment): boolean {
  return (
    old.model !== next.model ||
    (old.kind ?? 'model') !== (next.kind ?? 'model') ||
    // A class instance is built with its args: new args need new instances, or the spec would say
    // args its instances never saw.
    JSON.stringify(old.args ?? []) !== JSON.stringify(next.args ?? []) ||
    old.gpus !== next.gpus ||
    old.cpus !== next.cpus ||
    old.threads !== next.threads ||
    old.instances !== next.instances ||
    old.memory !== next.memory ||
    JSON.stringify(old.batch) !== JSON.stringify(next.batch) ||
    // A multiplexed replica bounds its models as it starts (actors/model-set.ts), where the head's dispatcher reads the spec.
    JSON.stringify(old.multiplex) !== JSON.stringify(next.multiplex) ||
    // A replica chooses its idle spin as it loads (actors/auto-layout.ts).
    old.idleSpinMs !== next.idleSpinMs ||
    // An instance sets up its slots as it starts (a spec naming a method its class lacks is refused then).
    old.maxConcurrency !== next.maxConcurrency ||
    JSON.stringify(old.concurrencyGroups) !== JSON.stringify(next.concurrencyGroups) ||
    // Replicas read label files as they load: other files need replicas that read them.
    JSON.stringify(labelFilesOf(old.labels)) !== JSON.stringify(labelFilesOf(next.labels))
  );
}

export function newDeployment(spec: ModelDeployment, memoryReserved: number): DeploymentRecord {
  const d = {
    spec,
    actors: [],
    metadata: null,
    labelLines: null,
    unhealthy: null,
    stats: new DeploymentStats(),
    coldStart: new ColdStart(),
    memoryReserved,
  } as unknown as DeploymentRecord;
  d.dispatcher = new Dispatcher(d);
  return d;
}

function lastLines(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

/**
 * The `count` lowest replica numbers not in use, so names stay short and stable across scaling.
 * Taken together for every replica a deploy adds: one at a time, each rescanned the deployment
 * (quadratic in its replicas, a tenth of a second for 60 deploys of 250 at once).
 */
export function freeReplicaIndices(d: DeploymentRecord, count: number): number[] {
  const used = new Set(d.actors.filter((a) => a.state !== 'DEAD' && a.state !== 'DRAINING').map((a) => Number(a.name.split('#')[1])));
  const free: number[] = [];
  for (let i = 0; free.length < count; i++) if (!used.has(i)) free.push(i);
  return free;
}

/** A new replica's record, PENDING until the scheduler places it. */
export function newActorRecord(d: DeploymentRecord, replica: number): ActorRecord {
  return {
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
    memoryBytes: d.memoryReserved,
    stats: null,
    usage: null,
  };
}

/** What the state file keeps: every deployment's spec, and each started actor's identity. */
export function snapshotState(state: ClusterState): { deployments: ModelDeployment[]; actors: SavedActor[] } {
  const deployments = [...state.deployments.values()].map((d) => d.spec);
  const actors: SavedActor[] = [];
  for (const d of state.deployments.values()) {
    for (const a of d.actors) {
      // Only actors that may have a live process are worth adopting; PENDING ones are placed anew.
      if (a.state !== 'STARTING' && a.state !== 'READY') continue;
      const node = a.nodeId ? state.nodes.get(a.nodeId)?.name : (a.awaitingNode ?? undefined);
      if (!node) continue;
      actors.push({
        id: a.id,
        name: a.name,
        deployment: a.deployment,
        node,
        gpus: a.gpus,
        gpuShare: a.gpuShare,
        cpus: a.cpus,
        memoryBytes: a.memoryBytes,
        device: a.device,
        pid: a.pid,
        restarts: a.restarts,
        secret: a.secret,
        ...(a.stateId === undefined ? {} : { stateId: a.stateId }),
        ...(a.servedBefore ? { servedBefore: true } : {}),
        ...(a.superseded ? { superseded: true } : {}),
      });
    }
  }
  return { deployments, actors };
}

/** An actor saved by an earlier head, STARTING until its node re-registers and lists it. */
export function restoredActorRecord(s: SavedActor): ActorRecord {
  return {
    id: s.id,
    name: s.name,
    deployment: s.deployment,
    state: 'STARTING',
    reason: `waiting for node ${s.node} to reconnect after a head restart`,
    nodeId: null,
    gpus: s.gpus,
    gpuShare: s.gpuShare,
    cpus: s.cpus,
    device: s.device,
    pid: s.pid,
    restarts: s.restarts,
    recentCrashes: [],
    secret: s.secret,
    link: undefined,
    visibleDevices: null,
    gpuMemoryMiB: null,
    memoryBytes: s.memoryBytes,
    stats: null,
    usage: null,
    awaitingNode: s.node,
    ...(s.stateId === undefined ? {} : { stateId: s.stateId }),
    ...(s.servedBefore ? { servedBefore: true } : {}),
    ...(s.superseded ? { superseded: true } : {}),
  };
}

/** An actor that will not be adopted: back to PENDING, to be placed anew as a fresh process. */
export function returnToPending(a: ActorRecord, why: string): void {
  a.awaitingNode = null;
  a.link?.terminate(why);
  a.link = undefined;
  a.nodeId = null;
  a.pid = null;
  a.gpus = [];
  a.state = 'PENDING';
  a.reason = `${why}; waiting for placement`;
}

/** Whether a deployment leaves its replicas' layout to them: a model of one ONNX file, no threads, instances or CPUs named. */
export function autoLayout(spec: DeploymentRecord['spec']): boolean {
  return batchesByDefault(spec) && spec.threads === undefined && spec.instances === undefined && spec.cpus === 1;
}

/**
 * Whether the head chooses `spec`'s replica count at load: `autoReplicas` (a spec that named no
 * replicas), and nothing else that sets the layout or the count (runtime/spec.ts replicasChoosable,
 * asked again here for the specs the head builds itself, as a version's deployment).
 */
export function choosesReplicasAtLoad(spec: ModelDeployment): boolean {
  return spec.autoReplicas === true && replicasChoosable(spec);
}

/** The agent's order to start this actor's process for deployment `d`. */
export function startActorMessage(a: ActorRecord, d: DeploymentRecord): Omit<Extract<HeadToAgent, { type: 'startActor' }>, 'id'> {
  return {
    type: 'startActor',
    actorId: a.id,
    deployment: d.spec.name,
    secret: a.secret,
    model: d.spec.model,
    gpus: a.gpus,
    // onnxruntime would otherwise start a thread per core in every actor and, with several
    // actors on a node, oversubscribe it; the actor's CPU budget is its thread count, shared by its instances.
    // A model deployment that names none of threads, instances or CPUs leaves them to the replica,
    // which measures its model at load (actors/auto-layout.ts).
    ...(autoLayout(d.spec)
      ? { autoLayoutReplicas: d.spec.replicas, ...(choosesReplicasAtLoad(d.spec) ? { autoReplicas: true as const } : {}) }
      : { threads: d.spec.threads ?? Math.max(1, Math.round(d.spec.cpus / (d.spec.instances ?? 1))) }),
    ...((d.spec.instances ?? 1) > 1 ? { instances: d.spec.instances } : {}),
    ...(d.spec.batch ? { batch: d.spec.batch } : {}),
    ...(d.spec.idleSpinMs !== undefined ? { idleSpinMs: d.spec.idleSpinMs } : {}),
    ...(d.spec.kind === 'fn' ? { kind: 'fn' as const, fn: d.spec.model } : {}),
    ...(d.spec.multiplex ? { multiplex: d.spec.multiplex } : {}),
    ...(d.spec.kind === 'class' ? { kind: 'class' as const, fn: d.spec.model, args: d.spec.args ?? [] } : {}),
    ...(d.spec.kind === 'class' && (d.spec.maxConcurrency ?? 1) > 1 ? { maxConcurrency: d.spec.maxConcurrency } : {}),
    ...(d.spec.kind === 'class' && d.spec.concurrencyGroups ? { concurrencyGroups: d.spec.concurrencyGroups } : {}),
    ...(labelFilesOf(d.spec.labels) ? { labelFiles: labelFilesOf(d.spec.labels) } : {}),
  };
}

/** Why an actor's process ended, as people read it: who killed it or its exit, and its last stderr lines. */
export function describeExit(exit: ActorExitReport): string {
  const how = exit.killedBecause ?? `exited with ${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`}`;
  if (!exit.stderrTail) return how;
  // The error it died of, not the frames of its stack that follow it (the last lines of an
  // uncaught exception are `at …` lines); the last lines when nothing reads as an error.
  const error = lastErrorLine(exit.stderrTail);
  return `${how}: ${error ?? lastLines(exit.stderrTail, 5)}`;
}

/** A line that states an error: `Error: …`, `TypeError …`, `TROUPE_ERR_…`, or a Troupe process's own `troupe <who>: …`. */
const ERROR_LINE = /^(?:Uncaught )?(?:[A-Z]\w*)?(?:Error|Exception)\b|^TROUPE_ERR_[A-Z_]+\b|^troupe [\w-]+: /;

/** The last line of `text` that states an error (bounded), or undefined. */
function lastErrorLine(text: string): string | undefined {
  const lines = text.trimEnd().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (ERROR_LINE.test(line)) return line.slice(0, 2000);
  }
  return undefined;
}

/**
 * The record of an actor process that joins the head (or rejoins it after losing the head: a
 * restart, a dropped connection) if its secret is right and the head still wants that process.
 * A secret is replaced whenever an actor is started anew, so an old process of a replaced actor
 * is shut out (and exits).
 */
export function joiningActor(state: ClusterState, actorId: string, secret: string): ActorRecord | undefined {
  const a = state.actors.get(actorId);
  // Constant time: a byte-by-byte compare would let a caller find the secret by timing.
  if (!a || !sameSecret(secret, a.secret) || (a.state !== 'STARTING' && a.state !== 'READY')) return undefined;
  const node = a.nodeId ? state.nodes.get(a.nodeId) : undefined;
  if (node?.state === 'DEAD') return undefined;
  return a;
}

/**
 * Actor `a` of `d` said `ready` on `link`: it takes calls, and `d` (and `whole`, the deployment
 * split between versions `d` is one of, which takes the signature of the first to be READY) has
 * the signature and label files it reported.
 */
export function markReady(
  a: ActorRecord,
  d: DeploymentRecord,
  whole: DeploymentRecord | undefined,
  ready: {
    link: HeadActorLink;
    metadata: ModelMetadata;
    visibleDevices: string;
    direct: ActorRecord['direct'];
    labelLines: Record<string, string[]> | undefined;
  },
): void {
  a.link = ready.link;
  a.direct = ready.direct;
  a.visibleDevices = ready.visibleDevices;
  a.state = 'READY';
  a.reason = null;
  d.metadata = ready.metadata;
  if (ready.labelLines) d.labelLines = ready.labelLines;
  d.coldStart.ready();
  d.startRefused = undefined;
  if (whole && !whole.metadata) whole.metadata = ready.metadata;
  if (whole && !whole.labelLines && ready.labelLines) whole.labelLines = ready.labelLines;
}
