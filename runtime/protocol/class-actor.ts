import * as z from 'zod';
import { HeadLinkEnv, IdSchema, MethodNameSchema, ModelMetadataSchema } from './common.js';
import { MAX_CONCURRENCY } from '../spec.js';
import { ConcurrencyGroupNameSchema } from '../concurrency-groups.js';

/**
 * A class actor (actors/class-host.ts) is one instance of a user's class in its own process. It
 * speaks the data-plane protocol of every actor (protocol/actor.ts): `ready`, then, instead of
 * tensor calls, `invoke` (a method by name with its arguments) and, once after a restart,
 * `restore` (the last checkpoint the head kept of the instance it replaces).
 */

/** What the agent passes to a class actor in its environment. */
export const ClassActorEnvSchema = z.object({
  TROUPE_HEAD_URL: z.string().url(),
  TROUPE_ACTOR_ID: IdSchema,
  TROUPE_ACTOR_SECRET: z.string().min(8).max(128),
  ...HeadLinkEnv,
  /** Absolute path of the module, already resolved inside the agent's --module-dir. */
  TROUPE_CLASS_MODULE: z.string().min(1),
  /** The module as the deploy named it: error messages show this, never the absolute path. */
  TROUPE_SHOWN_PATH: z.string().max(1000).optional(),
  TROUPE_CLASS_EXPORT: z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/),
  /** The constructor's arguments as a JSON array (checked by the deployment spec). */
  TROUPE_CLASS_ARGS: z
    .string()
    .max(1 << 20)
    .default('[]'),
  TROUPE_DEPLOYMENT: z.string().max(256).optional(),
  /**
   * The longest one method call (or one item of a stream) may take, from the agent's
   * --max-inference-ms: past it the call fails and the instance restarts (a promise that never
   * settles held an instance forever: health checks pass while its event loop idles).
   */
  TROUPE_MAX_CALL_MS: z.coerce.number().int().min(1).max(86_400_000).optional(),
  /** Calls the instance runs at once (the spec's maxConcurrency; default 1). */
  TROUPE_MAX_CONCURRENCY: z.coerce.number().int().min(1).max(MAX_CONCURRENCY).default(1),
  /** The spec's named concurrency groups as JSON (checked again by the instance: concurrency-groups.ts). */
  TROUPE_CONCURRENCY_GROUPS: z
    .string()
    .max(1 << 20)
    .optional(),
});
export type ClassActorEnv = z.infer<typeof ClassActorEnvSchema>;

/** Arguments of one method call: msgpack values (JSON values, byte arrays), at most this many. */
export const MAX_METHOD_ARGS = 256;
// In common.ts, since the deployment spec names methods too (retryable) and spec.ts cannot import this file.
export { MethodNameSchema } from './common.js';

/** The most items a stream may have granted and not yet sent: a reader's window is far smaller. */
export const MAX_STREAM_CREDIT = 1 << 20;

/** One method call, as the head sends it to the instance it chose. */
export const InvokeSchema = z.object({
  type: z.literal('invoke'),
  id: IdSchema,
  method: MethodNameSchema,
  args: z.array(z.unknown()).max(MAX_METHOD_ARGS),
  /** A graph step's call: args[0] is a map of wire tensors, and the method must answer one. */
  tensors: z.literal(true).optional(),
  /**
   * A streaming call (an async generator method): the items go back as `streamItem` messages
   * under this call's id, at most `credit` of them before the head grants more (`streamCredit`);
   * the reply, after the last item, is their count.
   */
  credit: z.number().int().min(1).max(MAX_STREAM_CREDIT).optional(),
  /** The instances whose running calls wait on this one, outermost first, ending with the instance it is sent to. */
  via: z.array(IdSchema).max(64).optional(),
  /** Time left until the caller's deadline: the method's context says it, and calls it makes inherit it. */
  timeoutMs: z.number().positive().optional(),
  /** The concurrency group the call runs in (the head resolved it); absent: its method's. */
  group: ConcurrencyGroupNameSchema.optional(),
  /** The group each instance of `via` runs its waiting call in, in the same order (for the head's cycle check). */
  viaGroups: z.array(ConcurrencyGroupNameSchema).max(64).optional(),
});

/** head -> actor: `n` more items of stream `stream` may be sent. */
export const StreamCreditSchema = z.object({
  type: z.literal('streamCredit'),
  stream: IdSchema,
  n: z.number().int().min(1).max(MAX_STREAM_CREDIT),
});
/** head -> actor: the reader is gone; stop the generator (its `finally` runs) and answer. */
export const StreamCancelSchema = z.object({ type: z.literal('streamCancel'), stream: IdSchema });
/**
 * head -> actor: the caller cancelled call `call` (an `invoke` without credit). Queued in the
 * instance, it is dropped unrun; running, its context's signal aborts so the method can stop.
 * Either way the instance answers the call (TROUPE_ERR_CANCELLED, or what the method returned).
 */
export const InvokeCancelSchema = z.object({ type: z.literal('invokeCancel'), call: IdSchema });
/** actor -> head (and head -> SDK client): item `seq` (from 0) of stream `stream`. */
export const StreamItemSchema = z.object({
  type: z.literal('streamItem'),
  stream: IdSchema,
  seq: z.number().int().min(0),
  value: z.unknown(),
});
export type StreamItem = z.infer<typeof StreamItemSchema>;

/**
 * What a class actor says of its methods in `ready`: each public method, with the tensor
 * signature the class declares for it (`static signatures`), or null; graphs are checked against it.
 */
export const ClassMethodsSchema = z
  .record(z.string().max(128), ModelMetadataSchema.nullable())
  .refine((m) => Object.keys(m).length <= 1024, 'at most 1024 methods');
export type ClassMethods = z.infer<typeof ClassMethodsSchema>;

/** The last checkpoint of the instance this process replaces, sent before it takes calls. */
export const RestoreSchema = z.object({
  type: z.literal('restore'),
  id: IdSchema,
  state: z.unknown(),
  /** How long `restore()` may take; past it the actor exits as if it had thrown (the restart says why). */
  timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
});

/**
 * A method's answer: its return value and, when the class defines `checkpoint()`, the state it
 * returned after this call (the head keeps the latest, to restore a restarted instance).
 */
export const InvokeReplySchema = z.object({
  value: z.unknown(),
  checkpoint: z.object({ state: z.unknown() }).optional(),
});
export type InvokeReply = z.infer<typeof InvokeReplySchema>;

/** Names a class actor never offers as methods: lifecycle hooks and anything private by convention. */
export const HOOK_METHODS = new Set(['constructor', 'restore', 'checkpoint', 'stateSize']);
