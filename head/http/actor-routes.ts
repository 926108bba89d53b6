import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { MethodNameSchema, NameSchema, newId, TroupeError } from '../../runtime/internal.js';
import { acceptBuffers, bodyBuffer } from './body.js';
import type { ApiContext } from './context.js';
import { streamOverSse } from './actor-stream-route.js';
import { INLINE_BODY_BYTES } from './body-thread.js';
import { CallBodySchema, readCallBody } from './call-body.js';
import { jsonText } from './json-value.js';

/**
 * Method calls on class actors over HTTP: `POST /api/v1/actors/{name}/{method}` with the
 * arguments as JSON, answered with the method's value. The same service as the SDK's
 * `handle.call` (head/calls/actor-calls.ts), so the rules cannot drift.
 */

/** A call's body: its arguments are JSON whose values reach the head's event loop (past 64 KiB parsed on the body thread first), so it gets a bound of its own. */
export const MAX_CALL_BODY_BYTES = 8 * 2 ** 20;

const CallAnswerSchema = z.object({
  /** This call's id: another call may take its result as an argument (`refs`) for 60 s. */
  id: z.string(),
  /** What the method returned. */
  value: z.unknown(),
  /** The instance that answered, and the identity of the state it answered from (send them back as `seen`). */
  instance: z.string().optional(),
  stateId: z.string().optional(),
});

function pathParams(request: FastifyRequest): { name: string; method: string } {
  const { name, method } = request.params as { name: string; method: string };
  if (!NameSchema.safeParse(name).success)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `actor name '${name.slice(0, 100)}' is not allowed: names are 1-63 letters, digits, ".", "_" or "-"`,
    );
  const m = MethodNameSchema.safeParse(method);
  if (!m.success) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `method '${method.slice(0, 100)}': ${m.error.issues[0]?.message}`);
  return { name, method };
}

/**
 * The call a request asks for: the actor and method of its path, the arguments and options of its
 * body (parsed and checked on the body thread past INLINE_BODY_BYTES, body-thread.ts).
 */
async function methodCall(ctx: ApiContext, request: FastifyRequest) {
  const { name, method } = pathParams(request);
  const bytes = bodyBuffer(request.body);
  const body =
    bytes.byteLength > INLINE_BODY_BYTES
      ? await ctx.bodies.parse('call', bytes, { actor: name, method })
      : readCallBody(bytes.toString('utf8'), name, method);
  return {
    actor: name,
    method,
    args: body.args,
    ...(body.refs ? { refs: body.refs } : {}),
    ...(body.sessionKey !== undefined ? { sessionKey: body.sessionKey } : {}),
    ...(body.timeoutMs !== undefined ? { timeoutMs: body.timeoutMs } : {}),
    ...(body.seen !== undefined ? { seen: body.seen } : {}),
    ...(body.concurrencyGroup !== undefined ? { concurrencyGroup: body.concurrencyGroup } : {}),
  };
}

export function registerActorRoutes(app: FastifyInstance, ctx: ApiContext): void {
  acceptBuffers(app, Math.min(ctx.maxBodyBytes, MAX_CALL_BODY_BYTES), ctx.bodyBudget);
  ctx.docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/actors/:name/:method/stream',
      tag: 'Actors',
      auth: 'write',
      summary: 'Calls an async generator method of a class actor and streams its items as server-sent events',
      description:
        'One `data:` event per item (its JSON, `id:` its number), then `event: end` with `{"items": n}`, or `event: error` with `{"code", "message"}`. ' +
        'The instance runs at most 16 items ahead of what the connection has taken; closing the connection stops the generator.',
      body: {
        content: { 'application/json': CallBodySchema },
        required: false,
        description: 'the arguments; an empty body calls without any',
      },
      responses: { 200: { description: 'the items, as server-sent events', content: { 'text/event-stream': 'text' } } },
    },
    async (request, reply) => {
      const call = await methodCall(ctx, request);
      // Refused as JSON while a status can still say so; once the events start it is 200.
      ctx.actors.check(call.actor);
      await streamOverSse(ctx.actors, reply, call, ctx.streamIdleMs);
    },
  );
  ctx.docs.route(
    app,
    {
      method: 'POST',
      url: '/api/v1/actors/:name/:method',
      tag: 'Actors',
      auth: 'write',
      summary: "Calls a method of a class actor with JSON arguments; answers with the method's value",
      description:
        'The instance is the one the sessionKey is bound to, else the least busy READY one. Calls to one instance run one at a time, in arrival order. ' +
        'A call is never retried on another instance: if its instance dies first, it fails with TROUPE_ERR_ACTOR_DIED.',
      body: {
        content: { 'application/json': CallBodySchema },
        required: false,
        description: 'the arguments; an empty body calls without any',
      },
      responses: { 200: { description: "the method's value", schema: CallAnswerSchema } },
    },
    async (request, reply) => {
      const id = newId();
      // A client that closes its connection before the answer no longer wants it: the call is
      // cancelled (dropped unrun if queued; a running method's signal aborts).
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableFinished) gone.abort();
      };
      reply.raw.once('close', onClose);
      const { value, instance, stateId } = await ctx.actors
        .call({ id, ...(await methodCall(ctx, request)) }, undefined, undefined, gone.signal)
        .finally(() => reply.raw.off('close', onClose));
      // A method that returns nothing answers null: JSON has no undefined.
      const served = instance === undefined ? '' : `,"instance":${JSON.stringify(instance)}`;
      const state = stateId === undefined ? '' : `,"stateId":${JSON.stringify(stateId)}`;
      const text = `{"id":${JSON.stringify(id)},"value":${jsonText(value === undefined ? null : value)}${served}${state}}`;
      return reply.type('application/json; charset=utf-8').send(text);
    },
  );
}
