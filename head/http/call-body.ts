import { z } from 'zod';
import { checkedBy, MAX_METHOD_ARGS, MAX_SESSION_KEY, MethodCallSchema, parseJson } from '../../runtime/internal.js';
import { checkMethodArgs } from '../calls/actor-calls.js';

/** The body of `POST /api/v1/actors/{name}/{method}` (actor-routes.ts), read on the event loop or the body thread alike. */
export const CallBodySchema = z
  .object({
    /** The method's arguments, in order (default none). */
    args: z.array(z.unknown()).max(MAX_METHOD_ARGS).default([]),
    /** Arguments that are the results of earlier calls (their `id`s), resolved on the head: index -> call. */
    refs: MethodCallSchema.shape.refs,
    /** Calls with the same key go to the same instance while it lives. */
    sessionKey: z.string().min(1).max(MAX_SESSION_KEY).optional(),
    /** Fail with TROUPE_ERR_DEADLINE_EXCEEDED (504) past this many ms; the method may still run to its end. */
    timeoutMs: MethodCallSchema.shape.timeoutMs,
    /**
     * The state each instance answered from in earlier answers (`instance` -> `stateId`): an
     * instance that restarted since with no checkpoint to restore fails the call with
     * TROUPE_ERR_STATE_LOST (410) instead of answering from a fresh state.
     */
    seen: MethodCallSchema.shape.seen,
    /** The concurrency group to run the call in instead of its method's; one the actor lacks is refused (400). */
    concurrencyGroup: MethodCallSchema.shape.concurrencyGroup,
  })
  .strict();

export type CallBody = z.output<typeof CallBodySchema>;

/** A call body's text parsed and checked, its arguments bounded as the call bounds them (so a stream is refused before its events start). */
export function readCallBody(text: string, actor: string, method: string): CallBody {
  // No body (or an empty one) calls the method without arguments.
  const raw = text.trim() === '' ? {} : parseJson(text, 'the call body');
  const body = checkedBy(CallBodySchema, raw, 'call body');
  checkMethodArgs(actor, method, body.args);
  return body;
}
