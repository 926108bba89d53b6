import * as z from 'zod';
import { IdSchema, NameSchema } from './common.js';
import { MAX_METHOD_ARGS, MethodNameSchema } from './class-actor.js';
import { ConcurrencyGroupNameSchema } from '../concurrency-groups.js';

/** An argument that is the result of an earlier actor call (a Future passed along), resolved on the head. */
export const CallRefSchema = z.object({ call: IdSchema });
export type CallRef = z.infer<typeof CallRefSchema>;

/** The most Futures one call may hold inside its arguments. */
export const MAX_NESTED_REFS = 1024;

/** The most instances one call may say it saw (an actor's instances a client remembers). */
export const MAX_SEEN_INSTANCES = 256;

/** The longest session key: keys are user or conversation ids, not payloads. */
export const MAX_SESSION_KEY = 256;

/**
 * A method call on a class actor, from an SDK client or an HTTP request: the head picks the
 * instance (the one its session is bound to, else the least busy READY one), fills in the
 * arguments that are Futures, and answers with the method's value.
 */
export const MethodCallSchema = z.object({
  type: z.literal('invoke'),
  id: IdSchema,
  actor: NameSchema,
  method: MethodNameSchema,
  args: z.array(z.unknown()).max(MAX_METHOD_ARGS),
  /** Arguments that are results of earlier calls: argument index (as a string) -> call. */
  refs: z
    .record(z.string().regex(/^\d{1,3}$/), CallRefSchema)
    .refine((r) => Object.keys(r).every((k) => Number(k) < MAX_METHOD_ARGS), `argument indexes are below ${MAX_METHOD_ARGS}`)
    .optional(),
  /**
   * Calls whose values fill the references (value-types.ts CallReference) inside the arguments:
   * Futures of earlier calls nested in arrays, objects, Maps or Sets.
   */
  nestedRefs: z.array(IdSchema).max(MAX_NESTED_REFS).optional(),
  /** Calls with the same key go to the same instance while it lives (sticky sessions). */
  sessionKey: z.string().min(1).max(MAX_SESSION_KEY).optional(),
  /**
   * The state each instance answered this caller from (instance name -> the answer's `stateId`):
   * an instance whose state began anew since (it restarted with no checkpoint to restore) fails
   * the call with TROUPE_ERR_STATE_LOST instead of answering from a fresh state.
   */
  seen: z
    .record(z.string().min(1).max(256), z.string().min(1).max(64))
    .refine((r) => Object.keys(r).length <= MAX_SEEN_INSTANCES, `at most ${MAX_SEEN_INSTANCES} instances`)
    .optional(),
  timeoutMs: z
    .number()
    .positive()
    .max(24 * 3600 * 1000)
    .optional(),
  /**
   * From a client inside a class actor: the instances whose running calls wait on this one,
   * outermost first, ending with the caller's own (as the head told it). The head refuses a call
   * that would wait on one of them (a cycle), and believes it only from a client whose hello proved
   * it is that last instance.
   */
  via: z.array(IdSchema).max(64).optional(),
  /** The concurrency group each instance of `via` runs its waiting call in, as the head told it. */
  viaGroups: z.array(ConcurrencyGroupNameSchema).max(64).optional(),
  /** The concurrency group to run the call in, instead of its method's (Ray's `.options(concurrency_group=…)`). */
  concurrencyGroup: ConcurrencyGroupNameSchema.optional(),
});
export type MethodCall = z.infer<typeof MethodCallSchema>;

/** A method's value, with the instance that answered and the identity of the state it answered from. */
export const MethodCallReplySchema = z.object({
  value: z.unknown(),
  instance: z.string().max(256).optional(),
  stateId: z.string().max(64).optional(),
});

/** The most items a reader may ask for at once: its window, and each grant after it. */
export const MAX_STREAM_WINDOW = 1024;

/**
 * A streaming call: a method that is an async generator. Its items come as `streamItem` pushes
 * under this request's id, at most `credit` ahead of what the client granted (`streamCredit`); the
 * reply, after the last item, is their count. `streamCancel` stops the generator.
 */
export const MethodStreamSchema = MethodCallSchema.extend({
  type: z.literal('stream'),
  credit: z.number().int().min(1).max(MAX_STREAM_WINDOW),
});
export type MethodStream = z.infer<typeof MethodStreamSchema>;
export const ClientStreamCreditSchema = z.object({
  type: z.literal('streamCredit'),
  id: IdSchema,
  stream: IdSchema,
  n: z.number().int().min(1).max(MAX_STREAM_WINDOW),
});
export const ClientStreamCancelSchema = z.object({ type: z.literal('streamCancel'), id: IdSchema, stream: IdSchema });
export const StreamEndSchema = z.object({ items: z.number().int().min(0) });

/**
 * The caller no longer wants call `call` (an `invoke` it sent on this connection): `future.cancel()`
 * or an aborted signal. A call still queued never runs; a running one is asked to stop (its
 * context's signal aborts). The call fails with TROUPE_ERR_CANCELLED; a call already answered is left as it is.
 */
export const ClientCallCancelSchema = z.object({ type: z.literal('cancel'), id: IdSchema, call: IdSchema });
