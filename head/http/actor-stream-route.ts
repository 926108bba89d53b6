import type { FastifyReply } from 'fastify';
import { MAX_STREAM_WINDOW, toWireError } from '../../runtime/internal.js';
import type { ActorCalls, MethodCallRequest } from '../calls/actor-calls.js';
import { jsonText } from './json-value.js';
import { pumpSse } from './sse.js';

/**
 * Streams a streaming method call to an HTTP client as server-sent events: one `data:` event per
 * item (its JSON, `id:` its number), then `event: end` with the count, or `event: error` with
 * `{code, message}` (the status is already 200 by then). Paced by the socket (sse.ts); a client
 * that disconnects cancels the stream.
 */
export function streamOverSse(
  actors: ActorCalls,
  reply: FastifyReply,
  call: Omit<MethodCallRequest, 'id'>,
  idleMs?: number,
): Promise<void> {
  return pumpSse(
    reply,
    {
      start: (caller, id, credit, push) => actors.stream(caller, { ...call, id, credit: Math.min(credit, MAX_STREAM_WINDOW) }, push),
      credit: (caller, id, n) => actors.credit(caller, id, n),
      closed: (caller) => actors.closed(caller),
    },
    {
      contentType: 'text/event-stream',
      item: (seq, value) => `id: ${seq}\ndata: ${itemJson(value)}\n\n`,
      end: (items) => `event: end\ndata: ${JSON.stringify({ items })}\n\n`,
      error: (err) => `event: error\ndata: ${JSON.stringify(toWireError(err))}\n\n`,
    },
    idleMs,
  );
}

/** An item as JSON text (json-value.ts): BigInts as strings; what JSON cannot say is refused, never answered as null. */
export function itemJson(value: unknown): string {
  return jsonText(value, 'item');
}
