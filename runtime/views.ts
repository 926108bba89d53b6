import * as z from 'zod';
import { ActorStatsSchema, ReplicaLayoutSchema } from './protocol/actor.js';
import { ModelMetadataSchema, TensorInfoSchema } from './protocol/common.js';
import { GpuSchema, NodeResourcesSchema } from './resources.js';
import { GroupTableSchema } from './concurrency-groups.js';

export const ACTOR_STATES = ['PENDING', 'STARTING', 'READY', 'DRAINING', 'RESTARTING', 'DEAD'] as const;
export type ActorState = (typeof ACTOR_STATES)[number];

export const NODE_STATES = ['ALIVE', 'SUSPECT', 'DEAD'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/** One actor as the head reports it: where it runs, and why it is in its state. */
export const ActorViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  deployment: z.string(),
  state: z.enum(ACTOR_STATES),
  /** PENDING: why it is not placed; DEAD: the cause. */
  reason: z.string().nullable(),
  node: z.string().nullable(),
  gpus: z.array(z.number()),
  device: z.string(),
  pid: z.number().nullable(),
  restarts: z.number(),
  inFlight: z.number(),
  /** CUDA_VISIBLE_DEVICES as the actor process reported it ('' for CPU actors; null until READY). */
  visibleDevices: z.string().nullable(),
  /** Sessions of its model the actor holds (a deployment's `instances`), once it has said it is READY. */
  instances: z.number().optional(),
  /** How a model actor runs its model and why, once it has said it is READY (actors/auto-layout.ts). */
  layout: ReplicaLayoutSchema.optional(),
  /** A class actor's concurrency groups (`default` included), each with its limit and methods, once READY; absent without named groups. */
  concurrencyGroups: GroupTableSchema.optional(),
  /** GPU memory the actor process holds, from nvidia-smi (null when unknown or simulated). */
  gpuMemoryMiB: z.number().nullable(),
  /** The actor's running totals: calls, batches, rows, calls expired unrun, time in queue and compute. */
  stats: ActorStatsSchema.nullable(),
});
export type ActorView = z.infer<typeof ActorViewSchema>;

export const DeploymentViewSchema = z.object({
  name: z.string(),
  model: z.string(),
  replicas: z.number(),
  state: z.enum(['DEPLOYING', 'READY', 'UNHEALTHY']),
  metadata: ModelMetadataSchema.nullable(),
  /** Calls waiting in the head for a replica with room. */
  queued: z.number(),
  /** Outcomes seen by the head, and recent latency percentiles (ms). */
  requests: z.object({
    ok: z.number(),
    failed: z.record(z.string(), z.number()),
    p50Ms: z.number().nullable(),
    p99Ms: z.number().nullable(),
  }),
  actors: z.array(ActorViewSchema),
  /** A deployment split between versions: each version, its share of calls, and the deployment that runs it. */
  versions: z
    .array(
      z.object({
        version: z.string(),
        model: z.string(),
        weight: z.number(),
        deployment: z.string(),
        state: z.enum(['DEPLOYING', 'READY', 'UNHEALTHY']),
      }),
    )
    .optional(),
  /** The deployment this one runs a version of. */
  versionOf: z.string().optional(),
  /**
   * How a model deployment runs, once a replica has said: `chosen` (replicas x instances x threads,
   * batching, who serves its HTTP) and `reason`, why; `auto` when its replicas chose their layout at
   * load because the deployment named none (docs/performance.md#fast-by-default).
   */
  layout: z.object({ chosen: z.string(), reason: z.string(), auto: z.boolean() }).optional(),
});
export type DeploymentView = z.infer<typeof DeploymentViewSchema>;

export const NodeViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  state: z.enum(NODE_STATES),
  address: z.string(),
  resources: NodeResourcesSchema,
  gpus: z.array(GpuSchema),
});
export type NodeView = z.infer<typeof NodeViewSchema>;

/** A graph registered on the head (see runtime/graph/), as `describe` lists it. */
export const GraphViewSchema = z.object({
  name: z.string(),
  kind: z.enum(['pipeline', 'ensemble', 'dataParallel']),
  /** Model and fn calls one run expands to (data-parallel chunks not counted). */
  steps: z.number(),
  /** Inputs and outputs as inferred from the models' metadata; null where a fn leaves them open. */
  inputs: z.array(TensorInfoSchema).nullable(),
  outputs: z.array(TensorInfoSchema).nullable(),
  /** The model and fn deployments it calls. */
  deployments: z.array(z.string()),
});
export type GraphView = z.infer<typeof GraphViewSchema>;

export const ClusterEventSchema = z.object({ time: z.number(), kind: z.string(), message: z.string() });
export type ClusterEventView = z.infer<typeof ClusterEventSchema>;

export const ClusterViewSchema = z.object({
  nodes: z.array(NodeViewSchema),
  deployments: z.array(DeploymentViewSchema),
  /** Lifecycle changes and scaling decisions, newest last. */
  events: z.array(ClusterEventSchema),
  graphs: z.array(GraphViewSchema).optional(),
});
export type ClusterView = z.infer<typeof ClusterViewSchema>;
