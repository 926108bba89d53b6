/**
 * What the head's status stream (`GET /api/v1/stream`, server-sent events) sends the page. Types
 * only, with no imports, so the browser build and the head share one definition: the head builds
 * these values, so the compiler checks it sends what the page reads.
 */

export type ActorStateName = 'PENDING' | 'STARTING' | 'READY' | 'DRAINING' | 'RESTARTING' | 'DEAD';

/** An actor holding (part of) a GPU. */
export interface GpuHolder {
  actor: string;
  deployment: string;
  state: ActorStateName;
  /** Fraction of the GPU it holds (1 for a whole GPU). */
  share: number;
  /** GPU memory its process holds, from nvidia-smi; null when unknown or simulated. */
  memoryMiB: number | null;
}

export interface StatusGpu {
  index: number;
  name: string;
  simulated: boolean;
  memoryTotalMiB: number;
  /** Measured by nvidia-smi; null for simulated GPUs (nothing to measure). */
  memoryUsedMiB: number | null;
  /** nvidia-smi's utilisation; for a simulated GPU, the share of time its actors spent computing. */
  utilizationPct: number | null;
  /** Sum of the holders' shares. */
  allocated: number;
  holders: GpuHolder[];
}

export interface StatusNode {
  id: string;
  name: string;
  state: 'ALIVE' | 'SUSPECT' | 'DEAD';
  address: string;
  cpus: number;
  /** CPUs reserved by the actors placed on the node. */
  cpusAllocated: number;
  memoryBytes: number;
  memoryAllocatedBytes: number;
  actors: number;
  gpus: StatusGpu[];
  /** Actors on its CPUs only (GPU holders show on their GPU), the first 32; `cpuActorsTotal` counts them all. */
  cpuActors: { name: string; deployment: string; state: ActorStateName }[];
  cpuActorsTotal: number;
}

export interface StatusActor {
  id: string;
  name: string;
  deployment: string;
  state: ActorStateName;
  /** PENDING: why it is not placed; RESTARTING: the crash; DEAD: the cause. */
  reason: string | null;
  node: string | null;
  device: string;
  gpus: number[];
  gpuShare: number;
  pid: number | null;
  restarts: number;
  inFlight: number;
  /** Calls queued inside the actor process. */
  queued: number;
  calls: number;
  /** A class actor's state size, when its class reports one (`stateSize()`). */
  stateBytes: number | null;
  gpuMemoryMiB: number | null;
  /** A multiplexed replica's models: those loaded now, and its calls that found their model loaded or not. */
  models?: { loaded: string[]; loads: number; hits: number; misses: number } | undefined;
  /** A class actor's concurrency groups: each one's limit, and the calls it runs and holds waiting. */
  groups?: { name: string; limit: number; running: number; waiting: number }[] | undefined;
  /** The newest crash or failure recorded for this actor, with its time. */
  lastError: { time: number; message: string } | null;
}

export interface StatusDeployment {
  name: string;
  model: string;
  kind: 'model' | 'fn' | 'class';
  replicas: number;
  state: 'DEPLOYING' | 'READY' | 'UNHEALTHY';
  unhealthy: string | null;
  /** Calls waiting in the head for a replica with room. */
  queued: number;
  ok: number;
  failed: number;
  /** Requests per second, averaged over the last few seconds. */
  rps: number;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Rows per model execution over the last few seconds; null without traffic. */
  meanBatch: number | null;
  /** Its actors, counted by state (a split's: its versions' actors, as `replicas` counts theirs). */
  states: Partial<Record<ActorStateName, number>>;
  /**
   * A deployment split between versions: each version, its weight (percent of calls), the
   * deployment that runs it, its model, its replicas (wanted and READY), the calls it ran and its
   * requests per second now (the share of calls it takes in fact).
   */
  versions?:
    | {
        version: string;
        weight: number;
        deployment: string;
        model: string;
        replicas: number;
        ready: number;
        calls: number;
        rps: number;
      }[]
    | undefined;
  /** After a promotion: the split as it was, which a rollback restores. */
  promotedFrom?: { version: string; weight: number }[] | undefined;
  /** A multiplexed deployment's models, most called first (at most 10): loads, hits, misses, replicas holding it. */
  models?: { name: string; loads: number; hits: number; misses: number; replicas: number }[] | undefined;
  /** How a model deployment runs and why, as describe() says it (head/state/deployment-layout.ts). */
  layout?: { chosen: string; reason: string } | undefined;
}

export type DagNodeKind = 'input' | 'output' | 'model' | 'fn' | 'combine' | 'split' | 'merge';

export interface DagNode {
  id: string;
  kind: DagNodeKind;
  label: string;
  /** The deployment a model or fn step calls. */
  deployment?: string;
  /** The sub-graph box it sits in. */
  group?: string;
}

/** A named sub-graph (pipeline, ensemble, data-parallel) drawn as a box around its steps. */
export interface DagGroup {
  id: string;
  label: string;
  group?: string;
}

export interface Dag {
  nodes: DagNode[];
  groups: DagGroup[];
  edges: { from: string; to: string }[];
}

export interface StatusGraph {
  name: string;
  kind: 'pipeline' | 'ensemble' | 'dataParallel';
  steps: number;
  deployments: string[];
  dag: Dag;
}

export interface StatusEvent {
  /** Increasing; the page drops events it already has. */
  seq: number;
  time: number;
  kind: string;
  message: string;
}

/**
 * New samples: one time (ms since the epoch) per sample; series named `<metric>|<subject>`, the
 * subject a deployment, a GPU (`<node>/gpu<index>`), or `*` for the cluster's aggregate (sent
 * instead of per-subject series when there are more subjects than a chart can tell apart).
 */
export interface StatusSeries {
  times: number[];
  values: Record<string, (number | null)[]>;
}

/** What the whole cluster adds up to: counts and resources, the same size at 3 nodes and at 3,000. */
export interface StatusSummary {
  nodes: { total: number; ALIVE: number; SUSPECT: number; DEAD: number };
  actors: { total: number } & Record<ActorStateName, number>;
  /** GPUs of nodes that are not DEAD; `allocated` sums the shares actors hold. */
  gpus: { total: number; simulated: number; allocated: number };
  cpus: { total: number; allocated: number };
  deployments: number;
  graphs: number;
}

export type NodeSort = 'name' | 'state' | 'actors' | 'cpus';

/** Which nodes a page shows: a page of them, sorted, filtered by text (name, address) and state. */
export interface NodeQuery {
  offset: number;
  limit: number;
  sort: NodeSort;
  descending: boolean;
  text: string;
  state: 'all' | 'ALIVE' | 'SUSPECT' | 'DEAD';
}

export type ActorSort =
  'name' | 'deployment' | 'state' | 'node' | 'device' | 'pid' | 'restarts' | 'queued' | 'inFlight' | 'calls' | 'stateBytes' | 'lastError';

/**
 * Which actors a page shows: a page of them, grouped (rows of one deployment, node or state
 * together, groups in order) then sorted, filtered by text (name, deployment, state, node,
 * reason, last error), state (`problems`: all but READY), deployment and node.
 */
export interface ActorQuery {
  offset: number;
  limit: number;
  group: 'none' | 'deployment' | 'node' | 'state';
  sort: ActorSort;
  descending: boolean;
  text: string;
  state: 'all' | 'problems' | ActorStateName;
  /** Only this deployment's actors ('' for all). */
  deployment: string;
  /** Only the actors on this node ('' for all). */
  node: string;
}

/** `POST /api/v1/stream/view`: what a page wants to see; the stream then sends that window. */
export interface StatusViewRequest {
  /** The id the stream's first update gave this page. */
  viewer: string;
  /** Numbered by the page, increasing: window updates say which view they answer, so a late one for an older view is ignored. */
  seq: number;
  nodes: NodeQuery;
  actors: ActorQuery;
}

/**
 * One page (window) of a sorted, filtered list. `full`: `rows` is every row of the window (on
 * connecting, or after a new view); otherwise `rows` holds only the rows that changed or came
 * into the window. `ids`, the window's order, comes whenever it changed.
 */
export interface StatusWindow<T> {
  /** The view this window answers (0: the default view). */
  viewSeq: number;
  full: boolean;
  /** Rows matching the filter, in the whole cluster. */
  total: number;
  offset: number;
  ids?: string[];
  rows: T[];
  /** With a grouped actors query: the rows in each group of this window's groups, in the whole filtered list. */
  groups?: { key: string; count: number }[];
}

/**
 * One event of the status stream (`event: update`). The first of a connection (`full`) has
 * everything the page shows; later ones only what changed for this page: the summary and the
 * figures of the head (small) always, deployments that changed, the rows of its windows that
 * changed, new samples and new events.
 */
export interface StatusUpdate {
  /** The head's clock when the update was made. */
  time: number;
  full: boolean;
  /** On the first update: the id to name in `POST /api/v1/stream/view`. */
  viewer?: string;
  /** Seconds of history the head keeps. */
  historySeconds: number;
  summary: StatusSummary;
  /** Full: every deployment; otherwise those that changed. */
  deployments: StatusDeployment[];
  /** Deployments gone since the last update. */
  removedDeployments: string[];
  /** Every top-level graph, when the set changed (always on the first update). */
  graphs?: StatusGraph[];
  nodes: StatusWindow<StatusNode>;
  actors: StatusWindow<StatusActor>;
  /** How late the head's event loop ran over its last 10 s window (ms): a stall shows here first. */
  headLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  /** The head's readiness, the very answer of `/readyz` and `/v2/health/ready` (head/control/readiness.ts). */
  readiness: { status: 'ready' | 'not ready'; ready: boolean; nodes: number; reason?: string };
  /**
   * New samples of the charted series; `seriesFull`: the whole history instead (on connecting, or
   * when the charts switch between per-subject lines and cluster aggregates).
   */
  series: StatusSeries;
  seriesFull: boolean;
  events: StatusEvent[];
}

/** `GET /status/session`: whether the stream needs a login, and whether this browser has one. */
export interface StatusSession {
  required: boolean;
  authorized: boolean;
}

/** What a page sees before it asks for anything (and what scripts reading the stream get): the page sizes the page uses. */
export const DEFAULT_NODE_QUERY: NodeQuery = { offset: 0, limit: 24, sort: 'state', descending: false, text: '', state: 'all' };
export const DEFAULT_ACTOR_QUERY: ActorQuery = {
  offset: 0,
  limit: 50,
  group: 'none',
  sort: 'deployment',
  descending: false,
  text: '',
  state: 'all',
  deployment: '',
  node: '',
};
