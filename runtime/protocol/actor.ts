import * as z from 'zod';
import { WireTensorMapSchema } from '../tensor/wire.js';
import { AckSchema, FailSchema, HeadLinkEnv, IdSchema, ModelMetadataSchema, ReplySchema, WireErrorSchema } from './common.js';
import { DirectInputsSchema, RegionOfferSchema } from './shared-memory.js';
import { ClassLabelsSchema, IdleSpinSchema, LabelListSchema, MAX_INSTANCES } from '../spec.js';
import { ConcurrencyGroupNameSchema, GroupTableSchema, MAX_CONCURRENCY_GROUPS } from '../concurrency-groups.js';
import {
  ClassMethodsSchema,
  InvokeCancelSchema,
  InvokeReplySchema,
  InvokeSchema,
  RestoreSchema,
  StreamCancelSchema,
  StreamCreditSchema,
  StreamItemSchema,
} from './class-actor.js';

/**
 * Actors talk to the head directly over their own connection (the data plane; `troupe agent
 * --actor-links relay` carries it inside the agent's, byte for byte); the node agent
 * only supervises them. That saves a decode and an encode per call compared with relaying
 * through the agent (Ray's workers likewise talk directly, the raylet only supervises).
 */

/** The bytes the head read of a connection before handing it over: at most a request head and a read's worth of body. */
const ConnectionHeadSchema = z.custom<Uint8Array>((b) => b instanceof Uint8Array && b.byteLength <= 1 << 20, 'bytes, at most 1 MiB');

/** head -> actor. */
export const HeadToActorSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('call'),
    id: IdSchema,
    inputs: WireTensorMapSchema,
    outputs: z.array(z.string()).optional(),
    /** Time left until the caller's deadline; the actor drops the call unrun once it passes. */
    timeoutMs: z.number().positive().optional(),
    /** The model of a multiplexed deployment's set the call is for. */
    model: z.string().min(1).max(256).optional(),
  }),
  /**
   * The head connected to the actor's handoff socket (see runtime/handoff/): the actor takes that
   * connection (only from process `headPid`) and serves the HTTP connections handed over it, with
   * the head's settings; requests it does not serve go to the head on loopback port `relayPort`.
   */
  z.object({
    type: z.literal('handoffOpen'),
    id: IdSchema,
    headPid: z.number().int().positive(),
    relayPort: z.number().int().min(1).max(65535),
    token: z.string().max(4096).optional(),
    host: z.string().max(255),
    maxBodyBytes: z.number().int().positive(),
    keepAliveTimeoutMs: z.number().int().min(0),
    headersTimeoutMs: z.number().int().min(0),
    /** The deployment's class labels, for the classification extension. */
    labels: ClassLabelsSchema.optional(),
  }),
  /** A client connection is queued on the handoff socket; `head` is what the head read of it. */
  z.object({ type: z.literal('connection'), head: ConnectionHeadSchema }),
  /** The head is at its --max-connections: close the oldest handed-over connection whose request is still coming. */
  z.object({ type: z.literal('evictSlow') }),
  /** Class actors only (protocol/class-actor.ts): a method call, and the restore that precedes any after a restart. */
  InvokeSchema,
  InvokeCancelSchema,
  RestoreSchema,
  StreamCreditSchema,
  StreamCancelSchema,
  /**
   * A multiplexed replica's models (tenants), asked by the head: `scan` lists them with their state
   * (re-reading the directory first; one `model`, or all), `describe` reads one's inputs and
   * outputs from its file, `load` loads one and pins it in memory, `unload` evicts and unpins it.
   */
  z.object({
    type: z.literal('tenant'),
    id: IdSchema,
    op: z.enum(['scan', 'describe', 'load', 'unload']),
    model: z.string().min(1).max(256).optional(),
  }),
]);

/**
 * client -> actor on a direct stream (see actors/direct-server.ts): first `hello` with the token
 * the head handed the client, answered by a `reply`; then calls, as the head sends them, except
 * that a client on the same host may put large inputs in shared memory it offered with `region`
 * (see shared-memory.ts).
 */
export const DirectHelloSchema = z.object({ type: z.literal('hello'), id: IdSchema, token: z.string().max(256) });
export const DirectCallSchema = HeadToActorSchema.options[0].extend({ inputs: DirectInputsSchema });
/** One call to run, from the head (or from a client, its direct inputs resolved). */
export type ActorCall = z.infer<(typeof HeadToActorSchema.options)[0]>;
export const ClientToReplicaSchema = z.discriminatedUnion('type', [DirectHelloSchema, DirectCallSchema, RegionOfferSchema]);
export type ClientToReplica = z.infer<typeof ClientToReplicaSchema>;

/** Where one call's time went inside the actor. */
export const CallTimingSchema = z.object({
  /** From arrival in the actor to the start of its run. */
  queueMs: z.number(),
  computeMs: z.number(),
  /** Rows and calls in the run this call was part of. */
  batchRows: z.number(),
  batchCalls: z.number(),
});
export type CallTiming = z.infer<typeof CallTimingSchema>;

/** An actor's answer to a call: the outputs asked for, and where the call's time went. */
export const CallReplySchema = z.object({ outputs: WireTensorMapSchema, timing: CallTimingSchema.optional() });
export type CallReply = z.infer<typeof CallReplySchema>;

/** One model of a multiplexed replica's set as the replica sees it (Triton's repository states, ModelMesh's AVAILABLE). */
export const TenantStateSchema = z.object({
  name: z.string().min(1).max(256),
  /** LOADED in memory, LOADING now, AVAILABLE (its file is there; it loads on its first call), UNAVAILABLE (its last load failed). */
  state: z.enum(['LOADED', 'LOADING', 'AVAILABLE', 'UNAVAILABLE']),
  /** Kept in memory by a repository load until an unload (never evicted for another model). */
  pinned: z.boolean().optional(),
  /** Why it is UNAVAILABLE: the load's error, naming the model, never a path. */
  reason: z.string().max(2000).optional(),
});
export type TenantState = z.infer<typeof TenantStateSchema>;

/** A replica's answer to a `tenant` message: the models asked about (scan, load, unload), or one's signature (describe). */
export const TenantReplySchema = z.object({
  tenants: z.array(TenantStateSchema).max(100_000).optional(),
  metadata: ModelMetadataSchema.optional(),
});
export type TenantReply = z.infer<typeof TenantReplySchema>;

/** The replies to what the head asks an actor, and to what a client asks a replica directly. */
export const HeadToActorReplies = {
  call: CallReplySchema,
  handoffOpen: AckSchema,
  invoke: InvokeReplySchema,
  restore: AckSchema,
  tenant: TenantReplySchema,
};
export const ClientToReplicaReplies = { hello: AckSchema, call: CallReplySchema, region: AckSchema };

/** Summed time of one kind, for Triton's statistics extension: how many, and ms in all. */
export const DurationTotalSchema = z.object({ count: z.number().min(0), ms: z.number().min(0) });
export type DurationTotal = z.infer<typeof DurationTotalSchema>;

/** One batch size's executions: how many ran, and their input, run and output times. */
export const BatchSizeTotalsSchema = z.object({
  count: z.number().min(0),
  inputMs: z.number().min(0),
  inferMs: z.number().min(0),
  outputMs: z.number().min(0),
});
export type BatchSizeTotals = z.infer<typeof BatchSizeTotalsSchema>;

/** Batch sizes kept per actor: a batch has at most BatchSchema's 65,536 rows, but few sizes occur. */
export const MAX_BATCH_SIZES_REPORTED = 1024;

/**
 * Where the time of every call an actor answered went, summed per call (a batch's input, run and
 * output times count once for each call in it, as Triton's per-request statistics do), and per
 * batch size (once per execution). Times run from the call's arrival in the actor.
 */
export const CallTotalsSchema = z.object({
  success: DurationTotalSchema,
  fail: DurationTotalSchema,
  queue: DurationTotalSchema,
  computeInput: DurationTotalSchema,
  computeInfer: DurationTotalSchema,
  computeOutput: DurationTotalSchema,
  /** Epoch ms of the last call answered, 0 before any. */
  lastAt: z.number().min(0),
  bySize: z
    .record(z.string().regex(/^\d{1,6}$/), BatchSizeTotalsSchema)
    .refine((r) => Object.keys(r).length <= MAX_BATCH_SIZES_REPORTED, 'too many batch sizes'),
});
export type CallTotals = z.infer<typeof CallTotalsSchema>;

/** Running totals an actor reports about once a second. */
export const ActorStatsSchema = z.object({
  calls: z.number(),
  batches: z.number(),
  rows: z.number(),
  expired: z.number(),
  failed: z.number(),
  computeMs: z.number(),
  queueMs: z.number(),
  queued: z.number(),
  /** Calls accepted and not yet answered, from the head and from clients calling it directly. */
  inFlight: z.number().optional(),
  /** Calls from clients calling directly that succeeded (the head counts the calls it sent itself). */
  directOk: z.number().optional(),
  /** Latencies (ms, arrival to answer) of some direct calls since the previous report. */
  directLatencyMs: z.array(z.number()).max(1024).optional(),
  /** Triton-style statistics of every call, whoever sent it (absent from actors of older builds). */
  totals: CallTotalsSchema.optional(),
  /** A class actor with concurrency groups: the calls each group runs and holds waiting now. */
  groups: z
    .record(ConcurrencyGroupNameSchema, z.object({ running: z.number().int().min(0), waiting: z.number().int().min(0) }))
    .refine((g) => Object.keys(g).length <= MAX_CONCURRENCY_GROUPS + 1, 'too many groups')
    .optional(),
  /** A multiplexed replica's models: loads, calls that found the model loaded (hits) or not, and which are loaded now. */
  models: z
    .record(
      z.string(),
      z.object({
        loads: z.number(),
        hits: z.number(),
        misses: z.number(),
        loaded: z.boolean(),
        /** Times taken out of memory for another model (absent from older builds). */
        evictions: z.number().optional(),
        /** Loads that failed (absent from older builds). */
        failedLoads: z.number().optional(),
      }),
    )
    .optional(),
  /** A multiplexed replica's call totals of each model it has run (Triton's statistics per tenant). */
  tenantTotals: z.record(z.string().max(256), CallTotalsSchema).optional(),
  /** A class actor's state size in bytes, when its class reports one (`stateSize()`). */
  stateBytes: z.number().min(0).optional(),
});
export type ActorStats = z.infer<typeof ActorStatsSchema>;
export type HeadToActor = z.infer<typeof HeadToActorSchema>;

/**
 * How a model replica runs its model: sessions, intra-op threads each, rows a run, whether a
 * session is on an inference thread, and why (`chosen: 'auto'` where the deployment left it to the
 * replica, actors/auto-layout.ts; `'spec'` where the deployment named threads or instances).
 */
export const ReplicaLayoutSchema = z.object({
  instances: z.number().int().min(1).max(MAX_INSTANCES),
  threads: z.number().int().min(1).max(256),
  batchMaxSize: z.number().int().min(1).max(65_536),
  inferenceThread: z.boolean(),
  /** A lone call's run at the declared shape, measured at load (ms). */
  runMs: z.number().min(0).optional(),
  /** How long the replica polls for the next call after its queue empties (ms; 0: it sleeps at once). */
  idleSpinMs: IdleSpinSchema.optional(),
  /** Replicas this replica's deployment runs best as, where the head chooses them at load (head/control/replicas-at-load.ts). */
  replicasWanted: z.number().int().min(1).max(256).optional(),
  chosen: z.enum(['auto', 'spec']),
  reason: z.string().max(1000),
});
export type ReplicaLayout = z.infer<typeof ReplicaLayoutSchema>;

/** actor -> head. `ready` follows the warm-up inference; `loadFailed` ends the actor. */
export const ActorToHeadSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('ready'),
    metadata: ModelMetadataSchema,
    device: z.string().max(64),
    provider: z.string().max(64),
    /** CUDA_VISIBLE_DEVICES as the actor process saw it: proof of its GPU pinning. */
    visibleDevices: z.string().max(256),
    /** Where SDK clients may call this actor directly, bypassing the head (see direct-server.ts). */
    direct: z.object({ url: z.string().url().max(512), token: z.string().min(16).max(128) }).optional(),
    /** The model file's size: the head's memory estimate for replicas of a model it cannot see (a path on the agent's disk). */
    modelBytes: z.number().int().min(0).optional(),
    /** The abstract socket address where a head on this host may hand client connections over (see runtime/handoff/). */
    handoff: z.object({ name: z.string().min(1).max(100) }).optional(),
    /** A class actor's public methods and their declared tensor signatures (see class-actor.ts). */
    methods: ClassMethodsSchema.optional(),
    /** Sessions of its model the actor holds, when more than one (actors/model-instances.ts). */
    instances: z.number().int().min(2).max(MAX_INSTANCES).optional(),
    /** How a model actor runs its model, and why (actors/auto-layout.ts). */
    layout: ReplicaLayoutSchema.optional(),
    /** Which of those methods are generators: a graph step on one streams its items on (runtime/graph/stream-executor.ts). */
    streams: z.array(z.string().max(128)).max(1024).optional(),
    /** A class actor with named concurrency groups: each group, `default` included, with its limit and methods. */
    groups: GroupTableSchema.optional(),
    /** The lines of the label files the deployment names, keyed as the agent passed them (runtime/spec.ts labelFilesOf). */
    labels: z.record(z.string().max(256), LabelListSchema).optional(),
  }),
  z.object({ type: z.literal('loadFailed'), error: WireErrorSchema }),
  ReplySchema.extend({ value: CallReplySchema }),
  z.object({ type: z.literal('stats'), stats: ActorStatsSchema }),
  /** A handed-over connection goes back (queued on the handoff socket): `head` is what was read of the request the actor does not serve. */
  z.object({ type: z.literal('connectionBack'), head: ConnectionHeadSchema }),
  /** A handed-over connection closed. */
  z.object({ type: z.literal('connectionClosed') }),
  /**
   * Handed-over connections whose request (a body) has been coming for a second or more, and since
   * when the oldest (ms since the epoch): the ones the head's connection cap may have closed.
   */
  z.object({ type: z.literal('slowConnections'), count: z.number().int().min(0), oldest: z.number().optional() }),
  /** An item of a class actor's streaming call. */
  StreamItemSchema,
  FailSchema,
]);
export type ActorToHead = z.infer<typeof ActorToHeadSchema>;

/** Headers an actor presents on its connection's upgrade, set by the agent that spawned it. */
export const ACTOR_ID_HEADER = 'x-troupe-actor-id';
export const ACTOR_SECRET_HEADER = 'x-troupe-actor-secret';

/** What the agent passes to a new actor process in its environment. */
export const ActorEnvSchema = z.object({
  TROUPE_HEAD_URL: z.string().url(),
  TROUPE_ACTOR_ID: IdSchema,
  TROUPE_ACTOR_SECRET: z.string().min(8).max(128),
  ...HeadLinkEnv,
  TROUPE_MODEL_PATH: z.string().min(1),
  /** The model as the deploy named it: error messages show this, never the absolute path. */
  TROUPE_SHOWN_PATH: z.string().max(1000).optional(),
  TROUPE_DEVICE: z.enum(['cpu', 'cuda', 'simulated-gpu']),
  TROUPE_THREADS: z.coerce.number().int().min(1).max(256).optional(),
  /** Model instances: sessions of the model, each on a thread of its own, the last on the main thread (actors/model-instances.ts). */
  TROUPE_INSTANCES: z.coerce.number().int().min(1).max(MAX_INSTANCES).optional(),
  /**
   * Set when the deployment names neither threads nor instances (nor CPUs): the replica picks its
   * sessions and threads at load from the host's cores, this count of replicas and the model's
   * measured cost (actors/auto-layout.ts).
   */
  TROUPE_AUTO_LAYOUT_REPLICAS: z.coerce.number().int().min(0).max(256).optional(),
  /** Set when the head chooses the replica count at load: a costly CPU model then holds one session per replica and asks for one replica per core. */
  TROUPE_AUTO_REPLICAS: z.literal('1').optional(),
  /**
   * Where a model's session runs: on an inference thread of its own, so the actor reads and parses
   * the next calls while one infers (`always`), on the actor's main thread (`never`), or decided at
   * load by its run time (`auto`, the default; see actors/load-model.ts). Passed down from the agent's environment.
   */
  TROUPE_INFERENCE_THREAD: z.enum(['auto', 'always', 'never']).optional(),
  /** The deployment's batch spec as JSON. */
  TROUPE_BATCH: z.string().optional(),
  /** The deployment's `idleSpinMs`, when it names one. */
  TROUPE_IDLE_SPIN_MS: z.coerce.number().pipe(IdleSpinSchema).optional(),
  /** The deployment's name, for error messages of direct calls. */
  TROUPE_DEPLOYMENT: z.string().max(256).optional(),
  /** The address to accept direct calls from SDK clients on; absent: calls come only through the head. */
  TROUPE_DATA_HOST: z.string().min(1).max(255).optional(),
  /** A multiplexed deployment's MultiplexSpec as JSON: TROUPE_MODEL_PATH is then a directory of models. */
  TROUPE_MULTIPLEX: z.string().optional(),
  /** Label files beside the model (JSON: output -> absolute path), and as the deploy named them (for messages). */
  TROUPE_LABEL_FILES: z.string().optional(),
  TROUPE_SHOWN_LABEL_FILES: z.string().optional(),
});
export type ActorEnv = z.infer<typeof ActorEnvSchema>;
