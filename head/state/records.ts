import type {
  ActorState,
  ActorStats,
  CallQueue,
  ClassMethods,
  GroupTable,
  InvokeReply,
  TenantReply,
  InvokeOrigin,
  LinkStream,
  ModelDeployment,
  ModelMetadata,
  NodeResources,
  NodeState,
  Replica,
  ReplicaLayout,
  TroupeError,
} from '../../runtime/internal.js';
import type { AgentLink } from '../control/agent-link.js';
import type { ColdStart } from '../calls/cold-start.js';
import type { DeploymentStats } from './deployment-stats.js';

// The head's records of nodes, actors and deployments: plain data the controller changes and
// everything else reads (cluster-state.ts holds them).

export interface NodeRecord {
  id: string;
  name: string;
  address: string;
  state: NodeState;
  resources: NodeResources;
  /** The agent's connection while it has one: where the controller asks it to start and stop actors. */
  agent: AgentLink | undefined;
  lastSeen: number;
  /** The agent process's own CPU time and memory, from its heartbeats. */
  usage: ProcessUsage | null;
}

export interface ProcessUsage {
  rssBytes: number;
  cpuSeconds: number;
}

export interface ActorRecord {
  id: string;
  /** Stable human name, `<deployment>#<replica>`. */
  name: string;
  deployment: string;
  state: ActorState;
  reason: string | null;
  nodeId: string | null;
  /** GPU indices on its node; with a fractional share, one index. */
  gpus: number[];
  /** Fraction of each GPU in `gpus` this actor holds (1 for whole GPUs). */
  gpuShare: number;
  cpus: number;
  device: string;
  pid: number | null;
  restarts: number;
  /** Crash times inside the restart window, for max-restarts accounting. */
  recentCrashes: number[];
  secret: string;
  link: HeadActorLink | undefined;
  /** Where it takes direct calls from clients, once READY (never shown, logged or stored). */
  direct?: { url: string; token: string } | undefined;
  visibleDevices: string | null;
  /** Sessions of its model the actor said it holds (model instances), once it said `ready`. */
  instances?: number;
  /** How a model actor said it runs its model, and why, once it said `ready` (actors/auto-layout.ts). */
  layout?: ReplicaLayout;
  gpuMemoryMiB: number | null;
  memoryBytes: number;
  /** The actor's own running totals (batches, rows, expired calls...), about once a second. */
  stats: ActorStats | null;
  usage: ProcessUsage | null;
  /**
   * Set on an actor restored from the head's state file after a restart: the name of the node it
   * ran on. Its agent lists it when it re-registers and the actor is adopted (same process), or
   * it is placed anew if that node does not bring it back.
   */
  awaitingNode?: string | null;
  /**
   * A class actor's latest checkpoint (what its `checkpoint()` returned after its last call),
   * kept here because the record outlives the process: a restarted instance is handed it first.
   */
  checkpoint?: { state: unknown } | undefined;
  /**
   * A class instance's state identity: new each time its process started anew with no checkpoint
   * to restore (what it held is gone), kept through restores and in the state file (a process that
   * outlives a head restart keeps its memory), so the sessions bound to it, and the clients that
   * saw it answer, can be told.
   */
  stateId?: string;
  /** Why the state `stateId` names began empty (for the callers' error). */
  stateLost?: string;
  /** A process of this instance has been READY before (a READY of a new process is a restart). */
  servedBefore?: boolean;
  /** The cause of its last crash, kept past the restart for the errors that follow from it. */
  lastCrash?: string;
  /**
   * A replica of the spec an update replaced, serving on until the new spec's replicas are READY
   * (a surge: the controller retires it then), or again as before if the update is refused.
   */
  superseded?: boolean;
  /** A class actor's public methods and their declared tensor signatures, from its `ready`. */
  classMethods?: ClassMethods | undefined;
  /** Which of a class actor's methods are generators (they stream), as its instance reported. */
  classStreams?: string[] | undefined;
  /** A class actor's concurrency groups (`default` included) with their limits and methods, from its `ready`; absent: only `default`. */
  classGroups?: GroupTable | undefined;
}

export interface DeploymentRecord {
  spec: ModelDeployment;
  actors: ActorRecord[];
  metadata: ModelMetadata | null;
  /** The lines of the label files the spec names, as the first READY replica read them (runtime/spec.ts classLabels). */
  labelLines: Record<string, string[]> | null;
  unhealthy: string | null;
  /**
   * A start from zero replicas that was refused (its model no longer loads): calls fail with its
   * error at once until `until`, and the autoscaler starts no replica before then; each refusal
   * doubles the wait (to 60 s). A replica READY clears it. Without it, every call waited 60 s for
   * a 504 while replicas were started and refused 72 times a minute.
   */
  startRefused?: { error: TroupeError; until: number; backoffMs: number } | undefined;
  /** Calls waiting for a replica with room. */
  dispatcher: CallQueue;
  /** Calls waiting for the first replica of a deployment scaled from zero to say what it takes. */
  coldStart: ColdStart;
  stats: DeploymentStats;
  /** Host memory each new replica reserves: the spec's, or an estimate (head/control/memory-estimate.ts). */
  memoryReserved: number;
  /**
   * Set by a repository unload (head/control/model-repository.ts): the spec to load back, and the spec
   * without replicas that replaced it (a deploy since then replaced that in turn, and wins).
   */
  unloaded?: { spec: ModelDeployment; as: ModelDeployment } | undefined;
}

/**
 * Calls an actor holds: those the head sent, or, when clients call it directly, the count it last
 * reported (which includes the head's), whichever is larger.
 */
export function inFlightOf(a: ActorRecord): number {
  return Math.max(a.link?.inFlight ?? 0, a.state === 'READY' ? (a.stats?.inFlight ?? 0) : 0);
}

/**
 * The head's link to one actor's socket (a ReplicaLink in production): the calls the deployment's
 * queue sends it, and what the controller does with it when the actor leaves service.
 */
export interface HeadActorLink extends Replica {
  readonly closed: boolean;
  /** Resolves when no call is in flight (at once if none is), or after `timeoutMs`. */
  whenIdle(timeoutMs: number): Promise<void>;
  /** Closes with a handshake: the actor is not wanted. */
  close(reason: string): void;
  /** Drops the socket at once; calls in flight fail as ACTOR_DIED (and are retried elsewhere). */
  terminate(reason?: string): void;
  /** A method call to a class actor (ReplicaLink has it; absent from test fakes that serve tensor calls only). */
  invoke?(method: string, args: unknown[], tensors?: boolean, signal?: AbortSignal, origin?: InvokeOrigin): Promise<InvokeReply>;
  /** A question to a multiplexed replica about the models of its set (ReplicaLink has it). */
  tenant?(op: 'scan' | 'describe' | 'load' | 'unload', model: string | undefined, timeoutMs: number): Promise<TenantReply>;
  /** A streaming method call to a class actor (ReplicaLink has it). */
  invokeStream?(
    method: string,
    args: unknown[],
    credit: number,
    onItem: (seq: number, value: unknown) => void,
    tensors?: boolean,
    group?: string,
  ): LinkStream;
}

/** What reads the records (metrics, routes) needs of the cluster state, without depending on it. */
export interface ClusterRecords {
  readonly nodes: ReadonlyMap<string, NodeRecord>;
  readonly actors: ReadonlyMap<string, ActorRecord>;
  readonly deployments: ReadonlyMap<string, DeploymentRecord>;
  nodeName(id: string | null): string | null;
}
