import { z } from 'zod';
import { ModelMetadataSchema } from './protocol/common.js';
import { GpuSchema, NodeResourcesSchema } from './resources.js';

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
  /** GPU memory the actor process holds, from nvidia-smi (null when unknown or simulated). */
  gpuMemoryMiB: z.number().nullable(),
});
export type ActorView = z.infer<typeof ActorViewSchema>;

export const DeploymentViewSchema = z.object({
  name: z.string(),
  model: z.string(),
  replicas: z.number(),
  state: z.enum(['DEPLOYING', 'READY', 'UNHEALTHY']),
  metadata: ModelMetadataSchema.nullable(),
  actors: z.array(ActorViewSchema),
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

export const ClusterViewSchema = z.object({
  nodes: z.array(NodeViewSchema),
  deployments: z.array(DeploymentViewSchema),
});
export type ClusterView = z.infer<typeof ClusterViewSchema>;
