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
  /** Names of its actors. */
  actors: string[];
  /** A multiplexed deployment's models, most called first (at most 10): loads, hits, misses, replicas holding it. */
  models?: { name: string; loads: number; hits: number; misses: number; replicas: number }[] | undefined;
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

/** New samples: one time (ms since the epoch) per sample; series named `<metric>|<subject>`. */
export interface StatusSeries {
  times: number[];
  values: Record<string, (number | null)[]>;
}

export interface StatusSnapshot {
  /** The head's clock when the snapshot was taken. */
  time: number;
  /** True on a connection's first message: series and events are the whole history, not new ones. */
  full: boolean;
  /** Seconds of history the head keeps. */
  historySeconds: number;
  nodes: StatusNode[];
  deployments: StatusDeployment[];
  actors: StatusActor[];
  graphs: StatusGraph[];
  /** How late the head's event loop ran over its last 10 s window (ms): a stall shows here first. */
  headLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  /** The head's readiness, the very answer of `/readyz` and `/v2/health/ready` (head/control/readiness.ts). */
  readiness: { status: 'ready' | 'not ready'; ready: boolean; nodes: number; reason?: string };
  series: StatusSeries;
  events: StatusEvent[];
}

/** `GET /status/session`: whether the stream needs a login, and whether this browser has one. */
export interface StatusSession {
  required: boolean;
  authorized: boolean;
}
