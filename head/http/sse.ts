import type { FastifyReply } from 'fastify';
import type { Socket } from 'node:net';
import { fixSendBuffer, newId } from '../../runtime/internal.js';

/** Items the head lets a stream run ahead of what the HTTP client's socket has taken. */
export const SSE_WINDOW = 16;

/**
 * The kernel send buffer of a stream's connection (the kernel doubles it): a reader that stops
 * reading holds back the window, this and its own receive buffer, where the autotuned one grew to
 * megabytes on loopback. Past the bandwidth-delay product of any link a stream of items crosses.
 */
export const SSE_SEND_BUFFER_BYTES = 16 * 1024;

/** How long a stream's connection may take nothing before the stream is cancelled (the head's --stream-idle-s). */
export const DEFAULT_STREAM_IDLE_MS = 60_000;

/** A stream the head reads on behalf of an HTTP client (ActorCalls' streams, GraphStreams' runs). */
export interface SseSource {
  /** Starts stream `id` for `caller` with `credit` items of room; `push` gets each item; resolves with the count after the last. */
  start(caller: object, id: string, credit: number, push: (seq: number, value: unknown) => void): Promise<{ items: number }>;
  /** The client took `n` more items. */
  credit(caller: object, id: string, n: number): void;
  /** The client went away: its streams stop. */
  closed(caller: object): void;
}

/** How the events of one kind of stream are written. */
export interface SseFormat {
  contentType: string;
  item(seq: number, value: unknown): string;
  end(items: number): string;
  error(err: unknown): string;
}

/**
 * Streams `source` to an HTTP client as server-sent events (the status is 200 once they start, so
 * a failure midway is an event of its own). The socket paces the producer: credit goes back only
 * for items the socket took without buffering (`write` true, or after `drain`), so a slow reader
 * holds it at its window plus what the socket's buffers hold; a client that disconnects cancels it.
 */
export async function pumpSse(reply: FastifyReply, source: SseSource, format: SseFormat, idleMs = DEFAULT_STREAM_IDLE_MS): Promise<void> {
  const res = reply.raw;
  const id = newId();
  // The connection scopes the stream's id, as an SDK connection does.
  const caller = {};
  let open = true;
  let owed = 0;
  let draining = false;
  // A reader that stopped reading holds the generator (and its instance's slot) at its window;
  // one that has taken nothing for idleMs is let go: the stream is cancelled, the connection closed.
  let idle: NodeJS.Timeout | undefined;
  const stalled = () => {
    idle ??= setTimeout(() => {
      if (!open) return;
      open = false;
      source.closed(caller);
      res.destroy();
    }, idleMs);
  };
  const grant = () => {
    if (owed > 0 && open) source.credit(caller, id, owed);
    owed = 0;
  };
  res.on('drain', () => {
    draining = false;
    clearTimeout(idle);
    idle = undefined;
    grant();
  });
  res.once('close', () => {
    open = false;
    clearTimeout(idle);
    source.closed(caller);
  });
  void reply.hijack();
  if (res.socket) fixSendBuffer(res.socket as Socket, SSE_SEND_BUFFER_BYTES);
  res.writeHead(200, { 'content-type': format.contentType, 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  res.flushHeaders();
  const event = (text: string) => (open ? res.write(text) : false);
  try {
    const { items } = await source.start(caller, id, SSE_WINDOW, (seq, value) => {
      let text: string;
      try {
        text = format.item(seq, value);
      } catch (err) {
        // An item HTTP cannot carry ends the stream with an error event that says why.
        event(format.error(err));
        open = false;
        res.end();
        source.closed(caller);
        return;
      }
      const taken = event(text);
      owed++;
      if (!taken) {
        draining = true;
        stalled();
      }
      // Half a window at a time while the socket keeps up; nothing while it is full.
      if (!draining && owed >= SSE_WINDOW / 2) grant();
    });
    event(format.end(items));
  } catch (err) {
    event(format.error(err));
  } finally {
    clearTimeout(idle);
    if (open) res.end();
  }
}
