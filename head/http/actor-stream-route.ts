import type { FastifyReply } from 'fastify';
import { MAX_STREAM_WINDOW, newId, toWireError } from '../../runtime/internal.js';
import type { ActorCalls, MethodCallRequest } from '../calls/actor-calls.js';

/** Items the head lets a stream run ahead of what the HTTP client's socket has taken. */
export const SSE_WINDOW = 16;

/**
 * Streams a streaming method call to an HTTP client as server-sent events: one `data:` event per
 * item (its JSON), then `event: end` with the count, or `event: error` with `{code, message}` (the
 * status is already 200 by then). The socket paces the generator: credit goes back only for items
 * the socket took without buffering (`write` true, or after `drain`), so a slow reader holds the
 * instance at its window; a client that disconnects cancels the stream.
 */
export async function streamOverSse(actors: ActorCalls, reply: FastifyReply, call: Omit<MethodCallRequest, 'id'>): Promise<void> {
  const res = reply.raw;
  const id = newId();
  // The connection scopes the stream's id, as an SDK connection does (ActorCalls.stream).
  const caller = {};
  let open = true;
  let owed = 0;
  let draining = false;
  const grant = () => {
    if (owed > 0 && open) actors.credit(caller, id, owed);
    owed = 0;
  };
  res.on('drain', () => {
    draining = false;
    grant();
  });
  res.once('close', () => {
    open = false;
    actors.closed(caller);
  });
  void reply.hijack();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  res.flushHeaders();
  const event = (text: string) => (open ? res.write(text) : false);
  try {
    const { items } = await actors.stream(caller, { ...call, id, credit: Math.min(SSE_WINDOW, MAX_STREAM_WINDOW) }, (seq, value) => {
      const taken = event(`id: ${seq}\ndata: ${itemJson(value)}\n\n`);
      owed++;
      if (!taken) draining = true;
      // Half a window at a time while the socket keeps up; nothing while it is full.
      if (!draining && owed >= SSE_WINDOW / 2) grant();
    });
    event(`event: end\ndata: ${JSON.stringify({ items })}\n\n`);
  } catch (err) {
    event(`event: error\ndata: ${JSON.stringify(toWireError(err))}\n\n`);
  } finally {
    if (open) res.end();
  }
}

/** An item as JSON text: BigInts as strings (JSON has none); anything else JSON cannot say becomes null. */
function itemJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) ?? 'null';
  } catch {
    return 'null';
  }
}
