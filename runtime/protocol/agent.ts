import * as z from 'zod';
import { GpuSchema, NodeResourcesSchema } from '../resources.js';
import { BatchSchema, ClassArgsSchema, IdleSpinSchema, LabelFileSchema, MAX_CONCURRENCY, MAX_INSTANCES, MultiplexSchema } from '../spec.js';
import { ConcurrencyGroupsSchema } from '../concurrency-groups.js';
import { AckSchema, FailSchema, IdSchema, NameSchema, ReplySchema } from './common.js';
import { DEFAULT_MAX_FRAME_BYTES } from './codec.js';

const RunningActorSchema = z.object({ actorId: IdSchema, pid: z.number().int().positive() });

/** Close reason of an agent that shuts down on purpose (its node leaves at once, no crash). */
export const AGENT_LEAVING = 'agent leaving';

/**
 * Close reason of a head that shuts down on purpose: its peers wait for the next head and say so
 * as news, not as a warning (a normal stop of `npm start` printed WARN lines that read like errors).
 */
export const HEAD_SHUTTING_DOWN = 'head shutting down';

/**
 * The largest frame a relayed actor link carries: a frame of its own inside the agent's connection
 * (Channel.sendAlone), under the same cap as every frame, less room for the envelope.
 */
export const MAX_RELAYED_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES - 65_536;
/** Relayed frames at least this large go in an agent frame of their own, so that frames joined in one turn never pass the limit. */
export const RELAYED_ALONE_BYTES = 1 << 20;

/** Sends a relayed frame's message on the agent's connection, in an agent frame of its own when the frame is large (RELAYED_ALONE_BYTES). */
export function sendRelayedFrame<M>(channel: { send(m: M): void; sendAlone(m: M): void }, message: M & { frame: Uint8Array }): void {
  if (message.frame.byteLength >= RELAYED_ALONE_BYTES) channel.sendAlone(message);
  else channel.send(message);
}

/** Which opening of an actor's link a message belongs to (the actor numbers them): a late message of an older one is dropped. */
const LinkSchema = z.number().int().min(0);
/** One frame of a relayed actor link, as the actor's own connection would carry it. */
const RelayedFrameSchema = z.object({
  type: z.literal('actorFrame'),
  actorId: IdSchema,
  link: LinkSchema,
  frame: z.custom<Uint8Array>(
    (b) => b instanceof Uint8Array && b.byteLength <= MAX_RELAYED_FRAME_BYTES,
    'a frame of bytes, within the relayed frame limit',
  ),
});
/** A relayed actor link closed by one end, as a close of its own connection would say. */
const RelayedCloseSchema = z.object({
  type: z.literal('actorClose'),
  actorId: IdSchema,
  link: LinkSchema,
  code: z.number().int().min(1000).max(4999),
  reason: z.string().max(256),
});

/** node agent -> head. */
export const AgentToHeadSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('register'),
    id: IdSchema,
    name: NameSchema,
    /**
     * Where this node can be reached, as the agent advertises it (`troupe agent --advertise`).
     * Absent: the head records the address the agent's connection came from, which behind NAT,
     * a proxy or a Kubernetes Service is not the node's own.
     */
    address: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[A-Za-z0-9.:_-]+$/, 'must be a host name or an IP address')
      .optional(),
    resources: NodeResourcesSchema,
    /** Actors this agent still runs from before a reconnect, for the head to adopt or stop. */
    actors: z.array(RunningActorSchema).max(4096),
  }),
  z.object({
    type: z.literal('heartbeat'),
    /** Fresh nvidia-smi samples (utilisation, memory); absent for simulated GPUs. */
    gpus: z.array(GpuSchema).max(64).optional(),
    /** GPU memory each actor process holds, from nvidia-smi --query-compute-apps. */
    actorGpuMemory: z
      .array(z.object({ actorId: IdSchema, usedMemoryMiB: z.number().min(0).nullable() }))
      .max(4096)
      .optional(),
    /** CPU time and memory of the agent (actorId null) and each of its actors. */
    processes: z
      .array(z.object({ actorId: IdSchema.nullable(), pid: z.number().int(), rssBytes: z.number().min(0), cpuSeconds: z.number().min(0) }))
      .max(4097)
      .optional(),
  }),
  z.object({
    type: z.literal('actorExited'),
    actorId: IdSchema,
    code: z.number().int().nullable(),
    signal: z.string().max(32).nullable(),
    /** The last lines the actor wrote to stderr, for the DEAD cause. */
    stderrTail: z.string().max(16384),
    /** Set when the agent killed it, e.g. it stopped answering health checks. */
    killedBecause: z.string().max(1024).optional(),
  }),
  /**
   * Actor links relayed by the agent (`troupe agent --actor-links relay`): one of its actors opens its
   * link to the head with its id and secret, then its frames go both ways inside this connection.
   */
  z.object({ type: z.literal('actorOpen'), id: IdSchema, actorId: IdSchema, link: LinkSchema, secret: z.string().min(8).max(128) }),
  RelayedFrameSchema,
  RelayedCloseSchema,
  ReplySchema,
  FailSchema,
]);
export type AgentToHead = z.infer<typeof AgentToHeadSchema>;

/** head -> node agent. */
export const HeadToAgentSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('reply'), id: IdSchema, value: z.unknown() }),
  FailSchema,
  z.object({
    type: z.literal('startActor'),
    id: IdSchema,
    actorId: IdSchema,
    /** The deployment's name, for the actor's own error messages. */
    deployment: z.string().max(256).optional(),
    secret: z.string().min(8).max(128),
    model: z.string().min(1).max(1024),
    /** Indices of the node's GPUs this actor may see (its CUDA_VISIBLE_DEVICES). */
    gpus: z.array(z.number().int().min(0)).max(64),
    threads: z.number().int().min(1).max(256).optional(),
    /** Model instances in the actor (sessions, each on a thread of its own: the last on the main thread). */
    instances: z.number().int().min(2).max(MAX_INSTANCES).optional(),
    batch: BatchSchema.optional(),
    /** The deployment's `idleSpinMs`, when it names one (else the replica chooses at load). */
    idleSpinMs: IdleSpinSchema.optional(),
    /** Where the deployment left its layout to the replica (no threads, instances or CPUs named): its replica count (actors/auto-layout.ts). */
    autoLayoutReplicas: z.number().int().min(0).max(256).optional(),
    /** The head chooses the replica count at load (spec `autoReplicas`): a costly CPU model's replica holds one session and says how many replicas to run. */
    autoReplicas: z.literal(true).optional(),
    /** 'fn' starts a fn actor (actors/fn-host) for graph steps, 'class' a class actor (actors/class-host), instead of a model actor. */
    kind: z.enum(['model', 'fn', 'class']).optional(),
    /** For kind 'fn' and 'class': `path#export`, resolved inside the agent's --module-dir. */
    fn: z.string().min(3).max(1024).optional(),
    /** Many models per replica: `model` is a directory (actors/multiplex-host). */
    multiplex: MultiplexSchema.optional(),
    /** For kind 'class': the constructor's arguments (JSON values). */
    args: ClassArgsSchema.optional(),
    /** For kind 'class': calls one instance runs at once (absent: 1). */
    maxConcurrency: z.number().int().min(2).max(MAX_CONCURRENCY).optional(),
    /** For kind 'class': the spec's named concurrency groups (runtime/concurrency-groups.ts). */
    concurrencyGroups: ConcurrencyGroupsSchema.optional(),
    /** Label files beside the model, by output ('' for every output): the actor reads them and reports their lines. */
    labelFiles: z.record(z.string().max(256), LabelFileSchema).optional(),
  }),
  z.object({ type: z.literal('stopActor'), id: IdSchema, actorId: IdSchema, graceMs: z.number().int().min(0).max(600_000) }),
  RelayedFrameSchema,
  RelayedCloseSchema,
]);
export type HeadToAgent = z.infer<typeof HeadToAgentSchema>;

export const StartActorReplySchema = z.object({ pid: z.number().int().positive() });

/** The replies to what the head asks an agent, and to the agent's registration. */
export const HeadToAgentReplies = { startActor: StartActorReplySchema, stopActor: AckSchema };
/** PEM text of a certificate or key (the head's own, handed to agents under TLS). */
const PemTextSchema = z
  .string()
  .min(1)
  .max(256 * 1024);
export const AgentToHeadReplies = {
  register: z.object({
    nodeId: z.string().min(1).max(256),
    /**
     * Under TLS, the head's certificate and key, which this node's replicas present on their direct
     * ports (docs/security.md). Sent only over the agent's TLS connection, kept in memory only.
     */
    directTls: z.object({ cert: PemTextSchema, key: PemTextSchema }).optional(),
  }),
  actorOpen: AckSchema,
};
