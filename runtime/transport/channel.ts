import type { WebSocket } from 'ws';
import type * as z from 'zod';
import { TroupeError, fromWireError, isErrorCode, toWireError } from '../errors.js';
import { MAX_RELAYED_FRAME_BYTES } from '../protocol/agent.js';
import { decodeFrame, encodeFrameParts } from '../protocol/codec.js';
import type { Fail } from '../protocol/common.js';
import { asFrameTransport } from './frame-transport.js';
import type { FrameTransport } from './frame-transport.js';

/**
 * The schema of the reply to each request this side sends, by the request's type: a request
 * whose type has none cannot be sent (`request` does not compile), and a reply that does not
 * match is refused in the channel (TROUPE_ERR_BAD_MESSAGE), so callers get typed values.
 */
export type ReplySchemas = Record<string, z.ZodType>;

export interface ChannelOptions<In, R extends ReplySchemas> {
  /** Schema of every message the peer may send; anything else gets `fail` BAD_MESSAGE. */
  schema: z.ZodType<In>;
  /** The replies to this side's requests (see ReplySchemas); none when it only answers. */
  replies?: R;
  /**
   * Messages other than replies to our own requests. `release` is given when the message came in
   * a pooled frame (see frame-stream.ts): call it once nothing reads the message's bytes (its
   * tensors are views of the frame) any more, and the frame's buffer is reused once every message
   * in it was released. Not calling it is safe: the buffer is then left to the collector.
   */
  onMessage: (message: In, release: (() => void) | undefined) => void;
  onClose?: (code: number, reason: string) => void;
  /** A frame or message the peer sent was refused; it has already been answered. */
  onRefused?: (error: TroupeError) => void;
  /**
   * This side sends on the users' values it receives, untouched (the head): they are decoded in
   * the form that encodes back to the same bytes (protocol/value-types.ts).
   */
  forwardsValues?: boolean;
  /**
   * The largest frame this side sends (default: what every receiver takes, less room for an
   * agent's relay envelope). A message over it fails at once with TROUPE_ERR_TOO_LARGE where
   * someone waits for it: sent, the receiver would drop the connection and every call on it.
   */
  maxFrameBytes?: number;
}

interface Pending {
  /** The request's type and the schema its reply must match. */
  type: string;
  schema: z.ZodType;
  resolve: (value: unknown) => void;
  reject: (error: TroupeError) => void;
  timer: NodeJS.Timeout | undefined;
}

let nextRequestId = 0;

const sizeOf = (parts: Uint8Array[]) => parts.reduce((sum, part) => sum + part.byteLength, 0);

/** `fn`, callable any number of times, run at most once. */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/** Where a message broke its schema, and how, for the error that refuses it. */
function where(issue: z.core.$ZodIssue | undefined): string {
  const at = issue && issue.path.length > 0 ? ` at '${issue.path.join('.')}'` : '';
  return `${at}: ${issue?.message ?? 'unknown'}`;
}

/** Omit that keeps a union a union (plain Omit collapses it to the common keys). */
export type OmitId<T> = T extends unknown ? Omit<T, 'id'> & { id?: string } : never;

/**
 * Messages over one frame transport (a WebSocket, or a length-prefixed stream),
 * shared by every Troupe process.
 *
 * - Writes are coalesced: all messages sent in one event-loop turn leave as one frame, so under
 *   load a hop costs one encode and one syscall per turn, not per call.
 * - Every frame is validated; a bad one is answered with a `fail` naming the problem and the
 *   connection stays up (a peer's mistake must not cost other calls on the socket).
 * - `request` matches `reply`/`fail` by id and rejects with TROUPE_ERR_CONNECTION_CLOSED when the
 *   socket goes, so no caller waits forever.
 */
export class Channel<In extends { type: string }, Out extends { type: string }, R extends ReplySchemas = Record<never, z.ZodType>> {
  readonly #transport: FrameTransport;
  readonly #options: ChannelOptions<In, R>;
  readonly #pending = new Map<string, Pending>();
  #outbox: unknown[] = [];
  #flushScheduled = false;
  #closed = false;
  #markClosed!: () => void;
  /** Settles when the socket has closed, for whatever reason. */
  readonly whenClosed = new Promise<void>((resolve) => (this.#markClosed = resolve));

  constructor(socket: WebSocket | FrameTransport, options: ChannelOptions<In, R>) {
    this.#transport = asFrameTransport(socket);
    this.#options = options;
    this.#transport.start({
      frame: (bytes, release) => this.#onFrame(bytes, release),
      refused: (error) => this.#refuse(null, error),
      closed: (code, reason) => this.#onClose(code, reason),
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Bytes sent on this channel that the peer has not taken yet (see FrameTransport.bufferedBytes). */
  get bufferedBytes(): number {
    return this.#transport.bufferedBytes;
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  send(message: Out | Fail): void {
    if (this.#closed) return;
    this.#outbox.push(message);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      queueMicrotask(() => this.#flush());
    }
  }

  /**
   * Sends `message` in a frame of its own, after what is queued: for a message so large (a relayed
   * frame) that joining it with others could pass the peer's frame limit.
   */
  sendAlone(message: Out): void {
    if (this.#closed) return;
    this.#flush();
    this.#sendEach([message]);
  }

  /** Sends a request and resolves with the peer's `reply` value, checked against its schema (or rejects with its `fail`). */
  request<M extends OmitId<Out> & { type: keyof R & string }>(message: M, timeoutMs?: number): Promise<z.output<R[M['type']]>> {
    if (this.#closed) return Promise.reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', 'connection is closed'));
    const schema = this.#options.replies?.[message.type];
    if (!schema) return Promise.reject(new TroupeError('TROUPE_ERR_INTERNAL', `no reply schema for requests of type '${message.type}'`));
    const id = message.id ?? `r${(nextRequestId++).toString(36)}`;
    return new Promise<z.output<R[M['type']]>>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(
              () =>
                // Not yet: after a stall (a busy head placing thousands of actors), timers run
                // before the I/O that came in meanwhile is read, and the answer may be in it; one
                // turn later it has been read (bench/scale/HISTORY.md: a 51 s stall failed 8,926
                // start orders whose answers had arrived). The pending entry says whether it did.
                setImmediate(() => {
                  if (this.#pending.get(id)?.reject !== reject) return;
                  this.#pending.delete(id);
                  reject(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `no answer to '${message.type}' within ${timeoutMs} ms`));
                }),
              timeoutMs,
            );
      this.#pending.set(id, { type: message.type, schema, resolve: resolve as (value: unknown) => void, reject, timer });
      this.send({ ...message, id } as unknown as Out);
    });
  }

  /** Answers a request with a value. */
  reply(id: string, value: unknown): void {
    this.send({ type: 'reply', id, value } as unknown as Out);
  }

  /** Answers a request (or a frame that had no usable id) with an error. */
  fail(id: string | null, error: unknown): void {
    this.send({ type: 'fail', id, error: toWireError(error) });
  }

  close(code = 1000, reason = ''): void {
    this.#flush();
    this.#transport.close(code, reason);
  }

  /** Drops the socket at once: for peers that broke the protocol or a process going down hard. */
  terminate(): void {
    this.#transport.terminate();
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#outbox.length === 0 || this.#closed) return;
    const batch = this.#outbox;
    this.#outbox = [];
    let parts: Uint8Array[];
    try {
      parts = encodeFrameParts(batch);
    } catch {
      // One message that cannot be encoded must not take the others of its turn with it.
      this.#sendEach(batch);
      return;
    }
    if (batch.length > 1 && sizeOf(parts) > this.#maxFrameBytes) this.#sendEach(batch);
    else this.#sendFrame(parts, batch[0]);
  }

  get #maxFrameBytes(): number {
    return this.#options.maxFrameBytes ?? MAX_RELAYED_FRAME_BYTES;
  }

  /** Sends one encoded frame, unless it is over the limit (then its one message fails where it is awaited). */
  #sendFrame(parts: Uint8Array[], message: unknown): void {
    const bytes = sizeOf(parts);
    if (bytes <= this.#maxFrameBytes) {
      this.#transport.send(parts);
      return;
    }
    const { type } = message as { type?: unknown };
    this.#undeliverable(
      message,
      new TroupeError(
        'TROUPE_ERR_TOO_LARGE',
        `a '${String(type)}' message of ${bytes} bytes is over the ${this.#maxFrameBytes} bytes one frame may carry (256 MiB less room for an agent's relay): nothing was sent`,
      ),
    );
  }

  /** Sends each message in a frame of its own, so that one that cannot go fails alone. */
  #sendEach(messages: readonly unknown[]): void {
    for (const message of messages) {
      let parts: Uint8Array[];
      try {
        parts = encodeFrameParts([message]);
      } catch (err) {
        this.#undeliverable(message, err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_UNSENDABLE_VALUE', String(err)));
        continue;
      }
      this.#sendFrame(parts, message);
    }
  }

  /** A message that cannot be sent fails where it is awaited: an answer as a `fail` of its request, a request of ours as a rejection. */
  #undeliverable(message: unknown, error: TroupeError): void {
    const { type, id, stream } = message as { type?: unknown; id?: unknown; stream?: unknown };
    const pending = typeof id === 'string' ? this.#pending.get(id) : undefined;
    // An answer (a reply, or an item of a stream) fails the peer's request it answers.
    const answers = type === 'streamItem' ? stream : type === 'reply' ? id : undefined;
    if (typeof answers === 'string') this.#transport.send(encodeFrameParts([{ type: 'fail', id: answers, error: toWireError(error) }]));
    else if (pending && typeof id === 'string') {
      this.#pending.delete(id);
      clearTimeout(pending.timer);
      pending.reject(error);
    } else this.#options.onRefused?.(error);
  }

  #onFrame(data: Buffer, release: (() => void) | undefined): void {
    let messages: unknown[];
    try {
      messages = decodeFrame(data, this.#options.forwardsValues);
    } catch (err) {
      release?.();
      this.#refuse(null, err as TroupeError);
      return;
    }
    // The frame's buffer is reused once each of its messages let go of it.
    let holding = messages.length;
    const letGo = release && (() => --holding === 0 && release());
    for (const raw of messages) this.#onRaw(raw, letGo && once(letGo));
  }

  #onRaw(raw: unknown, release: (() => void) | undefined): void {
    const type = (raw as { type?: unknown } | null)?.type;
    // A reply's value goes to whoever asked, who may keep it: its frame is never reused.
    if (type === 'reply' || type === 'fail') {
      if (this.#settle(raw as { type: string; id: unknown; value?: unknown; error?: unknown })) return;
    }
    const parsed = this.#options.schema.safeParse(raw);
    if (!parsed.success) {
      const id = (raw as { id?: unknown } | null)?.id;
      const what = `message${typeof type === 'string' ? ` '${type.slice(0, 64)}'` : ''} is invalid${where(parsed.error.issues[0])}`;
      release?.();
      this.#refuse(typeof id === 'string' && id.length <= 64 ? id : null, new TroupeError('TROUPE_ERR_BAD_MESSAGE', what));
      return;
    }
    try {
      this.#options.onMessage(parsed.data, release);
    } catch (err) {
      // A handler that throws is done with the message. A handler bug answers this message with
      // an error instead of taking the process down.
      release?.();
      const id = (parsed.data as { id?: unknown }).id;
      this.fail(typeof id === 'string' ? id : null, err);
    }
  }

  /** Resolves a pending request; false when the id is not ours (then it is validated as a message). */
  #settle(msg: { type: string; id: unknown; value?: unknown; error?: unknown }): boolean {
    if (typeof msg.id !== 'string') return false;
    const pending = this.#pending.get(msg.id);
    if (!pending) return false;
    this.#pending.delete(msg.id);
    if (pending.timer) clearTimeout(pending.timer);
    if (msg.type === 'reply') {
      const parsed = pending.schema.safeParse(msg.value);
      if (parsed.success) pending.resolve(parsed.data);
      else
        pending.reject(
          new TroupeError('TROUPE_ERR_BAD_MESSAGE', `the reply to '${pending.type}' is invalid${where(parsed.error.issues[0])}`),
        );
    } else {
      const wire = msg.error as { code?: unknown; message?: unknown } | undefined;
      const err =
        wire && typeof wire.message === 'string' && isErrorCode(wire.code)
          ? fromWireError({ code: wire.code, message: wire.message })
          : new TroupeError('TROUPE_ERR_INTERNAL', 'peer sent a malformed error');
      pending.reject(err);
    }
    return true;
  }

  #refuse(id: string | null, error: TroupeError): void {
    this.fail(id, error);
    this.#options.onRefused?.(error);
  }

  #onClose(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#outbox = [];
    const error = new TroupeError(
      'TROUPE_ERR_CONNECTION_CLOSED',
      `connection closed (${code}${reason ? `: ${reason}` : ''}) before an answer arrived`,
    );
    for (const [id, pending] of this.#pending) {
      if (pending.timer) clearTimeout(pending.timer);
      pending.reject(error);
      this.#pending.delete(id);
    }
    this.#markClosed();
    this.#options.onClose?.(code, reason);
  }
}
