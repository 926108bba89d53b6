import * as z from 'zod';
import { WireTensorMapSchema } from '../tensor/wire.js';
import { MAX_DEPLOY_TIMEOUT_S } from '../deploy-timeout.js';
import { RunTraceSchema } from '../graph/trace.js';
import { GraphDeploymentViewSchema } from '../graph/view.js';
import { ClusterViewSchema, DeploymentViewSchema } from '../views.js';
import { AckSchema, FailSchema, IdSchema, NameSchema, ReplySchema } from './common.js';
import { RoutesSchema } from './routes.js';
import {
  MAX_STREAM_WINDOW,
  ClientCallCancelSchema,
  ClientStreamCancelSchema,
  ClientStreamCreditSchema,
  MethodCallReplySchema,
  MethodCallSchema,
  MethodStreamSchema,
  StreamEndSchema,
} from './method-call.js';
import { StreamItemSchema } from './class-actor.js';

/**
 * An output of an earlier run (a future passed as an input): the run's id and, when the run has
 * more than one output, which one.
 */
export const RunRefSchema = z.object({ run: IdSchema, output: z.string().min(1).max(256).optional() });
export type RunRef = z.infer<typeof RunRefSchema>;

/** SDK client -> head. Every message is a request: the head answers with `reply` or `fail`. */
/** What a run names, read as one answer (`run`) or as a stream (`runStream`). */
const runFields = {
  id: IdSchema,
  deployment: z.string().max(256),
  inputs: WireTensorMapSchema,
  /** Which outputs to return; all when absent. */
  outputs: z.array(z.string().max(256)).max(1024).optional(),
  timeoutMs: z
    .number()
    .positive()
    .max(24 * 3600 * 1000)
    .optional(),
  /** Inputs that are outputs of earlier runs (futures), resolved on the head: input name -> run. */
  refs: z.record(z.string().min(1).max(256), RunRefSchema).optional(),
};

export const ClientToHeadSchema = z.discriminatedUnion('type', [
  /** The first message on every connection: the head closes one that says nothing for 10 s. */
  z.object({
    type: z.literal('hello'),
    id: IdSchema,
    /**
     * Sent by a client inside a class actor (its TROUPE_ACTOR_ID and TROUPE_ACTOR_SECRET): the head
     * then knows which instance the calls come from and refuses one that would wait on itself.
     */
    actor: z.object({ id: IdSchema, secret: z.string().min(8).max(128) }).optional(),
  }),
  z.object({
    type: z.literal('deploy'),
    id: IdSchema,
    spec: z.unknown(),
    /** false: answer at once with the deployment as it is (actors may still be PENDING). */
    wait: z.boolean().optional(),
    /** How long the head waits for READY before failing with TROUPE_ERR_DEPLOY_TIMEOUT and the reasons (default 60 s). */
    timeoutMs: z
      .number()
      .positive()
      .max(MAX_DEPLOY_TIMEOUT_S * 1000)
      .optional(),
    /** true: a READY deployment of the same name with a different spec is replaced (else TROUPE_ERR_DEPLOYMENT_EXISTS). */
    replace: z.boolean().optional(),
  }),
  /** Ends a rollout (docs/rollouts.md): `promote` one version, or `rollback`; answered once READY. */
  z.object({
    type: z.literal('rollout'),
    id: IdSchema,
    name: NameSchema,
    action: z.enum(['promote', 'rollback']),
    /** The version to promote (promote only). */
    version: z.string().min(1).max(16).optional(),
    timeoutMs: z
      .number()
      .positive()
      .max(MAX_DEPLOY_TIMEOUT_S * 1000)
      .optional(),
  }),
  z.object({
    type: z.literal('undeploy'),
    id: IdSchema,
    name: NameSchema,
    /** true: delete a deployment even while graphs call it (else TROUPE_ERR_DEPLOYMENT_IN_USE). */
    force: z.boolean().optional(),
  }),
  z.object({
    type: z.literal('run'),
    ...runFields,
    /** Answer with a per-step timing trace beside the outputs. */
    trace: z.boolean().optional(),
    /** The model of a multiplexed deployment's set to run. */
    model: z.string().min(1).max(256).optional(),
  }),
  /**
   * A run read as a stream (a graph with a generator method step; anything else gives one item):
   * the outputs of each item come as `streamItem` pushes under this id, at most `credit` ahead of
   * what the client granted (`streamCredit`); the reply, after the last, is their count.
   */
  z.object({
    type: z.literal('runStream'),
    /** Its timeoutMs bounds the steps that are not streams; a stream itself is paced by its reader. */
    ...runFields,
    credit: z.number().int().min(1).max(MAX_STREAM_WINDOW),
  }),
  z.object({ type: z.literal('describe'), id: IdSchema }),
  /** A method call on a class actor (docs/actors.md); answered with its value. */
  MethodCallSchema,
  /** Cancels a method call this connection made. */
  ClientCallCancelSchema,
  /** A streaming method call, and the reader's credit and cancel for it. */
  MethodStreamSchema,
  ClientStreamCreditSchema,
  ClientStreamCancelSchema,
  /** The deployment's replicas that take direct calls; the head then pushes `routes` when they change. */
  z.object({ type: z.literal('routes'), id: IdSchema, deployment: z.string().max(256) }),
  /**
   * The calls this client holds for deployments it calls directly (waiting in its own queue, and
   * sent but unanswered), about every 250 ms while there are any: the autoscaler's view of load
   * the head does not see (Ray Serve's handles report theirs the same way).
   */
  z.object({
    type: z.literal('load'),
    id: IdSchema,
    loads: z.record(z.string().max(256), z.object({ queued: z.number().int().min(0), inFlight: z.number().int().min(0) })),
  }),
]);
export type ClientToHead = z.infer<typeof ClientToHeadSchema>;

/** What a run answers: its outputs, and the per-step timing when asked for (`trace`). */
export const RunReplySchema = z.object({
  outputs: WireTensorMapSchema,
  trace: RunTraceSchema.optional(),
  /** The version that ran the call, when the deployment run is split between versions. */
  version: z.string().max(64).optional(),
});

/** The head's reply to each request of a client. A graph's deploy answers with the graph's view. */
export const ClientToHeadReplies = {
  hello: AckSchema,
  deploy: z.union([GraphDeploymentViewSchema, DeploymentViewSchema]),
  undeploy: AckSchema,
  rollout: DeploymentViewSchema,
  run: RunReplySchema,
  describe: ClusterViewSchema,
  routes: RoutesSchema,
  load: AckSchema,
  invoke: MethodCallReplySchema,
  stream: StreamEndSchema,
  runStream: StreamEndSchema,
  streamCredit: AckSchema,
  streamCancel: AckSchema,
  cancel: AckSchema,
};

/** head -> SDK client: answers, and the route updates of deployments the client asked about. */
export const HeadToClientSchema = z.discriminatedUnion('type', [
  ReplySchema,
  FailSchema,
  z.object({ type: z.literal('routes'), routes: RoutesSchema }),
  /** An item of a streaming method call, under the call's id. */
  StreamItemSchema,
]);
export type HeadToClient = z.infer<typeof HeadToClientSchema>;
