import { TroupeError } from '../errors.js';
import { ClientToHeadReplies, HeadToClientSchema } from '../protocol/client.js';
import type { ClientToHead, HeadToClient } from '../protocol/client.js';
import { Channel } from '../transport/channel.js';
import { MAX_RECONNECT_MS, Reconnect } from '../transport/reconnect.js';
import type { OmitId } from '../transport/channel.js';
import type * as z from 'zod';
import type { FrameTransport } from '../transport/frame-transport.js';
import { openFrameTransport } from '../transport/open-transport.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../protocol/codec.js';
import type { TlsClientOptions } from '../transport/tls.js';

type ClientChannel = Channel<HeadToClient, ClientToHead, typeof ClientToHeadReplies>;

export interface HeadConnectionOptions {
  token?: string | undefined;
  connectTimeoutMs: number;
  /** Reconnect after the connection drops (default true). */
  reconnect: boolean;
  /** Messages the head sends unasked (route updates). */
  onPush?: (message: HeadToClient) => void;
  /** The connection came back after a drop. */
  onReconnect?: () => void;
  /** The class actor this client runs in, said in hello (the head refuses calls that would wait on themselves). */
  actor?: { id: string; secret: string } | undefined;
  /** What a `wss:` connection trusts (and presents). */
  tls?: TlsClientOptions | undefined;
}

/** Opens one connection to the head's client endpoint; rejects with a TroupeError saying why not. */
function openSocket(
  url: URL,
  headers: Record<string, string>,
  timeoutMs: number,
  tls: TlsClientOptions | undefined,
): Promise<FrameTransport> {
  // Replies are handed to users, who may keep their tensors: exact allocations, not pooled frames.
  return openFrameTransport(url, headers, { maxFrameBytes: DEFAULT_MAX_FRAME_BYTES, pooled: false, timeoutMs, tls });
}

/**
 * The SDK's connection to a head, kept up: when it drops (a head restart, a network blip), the
 * requests waiting on it fail at once with TROUPE_ERR_CONNECTION_CLOSED (retryable; nothing
 * hangs), requests made while it is down fail the same way, and it reconnects in the background
 * with back-off (transport/reconnect.ts). The reconnect timer does not keep a process alive on
 * its own.
 */
export class HeadConnection {
  readonly #url: URL;
  readonly #headers: Record<string, string>;
  readonly #options: HeadConnectionOptions;
  #channel: ClientChannel | undefined;
  readonly #reconnect = new Reconnect(() => this.#reopen(), { keepsProcessAlive: false });
  #closed = false;
  #lastError: string | undefined;
  #waiters = new Set<() => void>();

  private constructor(url: URL, options: HeadConnectionOptions) {
    this.#url = url;
    this.#options = options;
    this.#headers = options.token ? { authorization: `Bearer ${options.token}` } : {};
  }

  /** Connects once (failing as the first attempt fails), then keeps the connection up. */
  static async open(url: URL, options: HeadConnectionOptions): Promise<HeadConnection> {
    const conn = new HeadConnection(url, options);
    conn.#attach(await openSocket(url, conn.#headers, options.connectTimeoutMs, options.tls));
    return conn;
  }

  get connected(): boolean {
    return this.#channel !== undefined && !this.#channel.closed;
  }

  /** Sends a request on the current connection; without one, fails at once with TROUPE_ERR_CONNECTION_CLOSED. */
  request<M extends OmitId<ClientToHead> & { type: keyof typeof ClientToHeadReplies }>(
    message: M,
    timeoutMs?: number,
  ): Promise<z.output<(typeof ClientToHeadReplies)[M['type']]>> {
    if (this.#closed)
      return Promise.reject(new TroupeError('TROUPE_ERR_CLIENT_CLOSED', 'this client was closed (close()): connect() again to make calls'));
    const channel = this.#channel;
    if (!channel || channel.closed) {
      const why = this.#lastError ? `: ${this.#lastError}` : '';
      return Promise.reject(
        new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `not connected to the head at ${this.#url.origin} (reconnecting${why})`),
      );
    }
    return channel.request(message, timeoutMs);
  }

  /** Resolves true once connected, or false after `timeoutMs` (or at once when closed). */
  whenConnected(timeoutMs: number): Promise<boolean> {
    if (this.connected) return Promise.resolve(true);
    if (this.#closed || !this.#options.reconnect) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve(this.connected);
      };
      const timer = setTimeout(wake, timeoutMs);
      this.#waiters.add(wake);
    });
  }

  /** Stops reconnecting and closes; requests still waiting reject with TROUPE_ERR_CONNECTION_CLOSED. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#reconnect.stop();
    for (const wake of [...this.#waiters]) wake();
    const channel = this.#channel;
    if (!channel || channel.closed) return;
    channel.close(1000, 'client closed');
    const timer = setTimeout(() => channel.terminate(), 2000);
    await channel.whenClosed;
    clearTimeout(timer);
  }

  #attach(ws: FrameTransport): void {
    const reconnected = this.#channel !== undefined;
    const channel: ClientChannel = new Channel<HeadToClient, ClientToHead, typeof ClientToHeadReplies>(ws, {
      replies: ClientToHeadReplies,
      schema: HeadToClientSchema,
      onMessage: (message) => this.#options.onPush?.(message),
      onClose: (code, reason) => {
        if (this.#channel !== channel) return;
        this.#lastError = `connection closed (${code}${reason ? `: ${reason}` : ''})`;
        this.#scheduleReconnect();
      },
    });
    // At once: the head closes a connection that has said nothing within its bound (10 s), and a
    // client may well sit idle longer than that. A head that predates hello answers it with a
    // BAD_MESSAGE fail, which changes nothing.
    channel.request({ type: 'hello', ...(this.#options.actor ? { actor: this.#options.actor } : {}) }, 30_000).catch(() => {});
    this.#channel = channel;
    this.#reconnect.succeeded();
    this.#lastError = undefined;
    for (const wake of [...this.#waiters]) wake();
    if (reconnected) this.#options.onReconnect?.();
  }

  #scheduleReconnect(): void {
    if (this.#closed || !this.#options.reconnect) return;
    this.#reconnect.schedule();
  }

  #reopen(): void {
    openSocket(this.#url, this.#headers, this.#options.connectTimeoutMs, this.#options.tls).then(
      (ws) => {
        if (this.#closed) ws.terminate();
        else this.#attach(ws);
      },
      (err: unknown) => {
        this.#lastError = (err as Error).message;
        this.#scheduleReconnect();
      },
    );
  }
}

/** How a retried SDK call backs off: 50 ms doubling to 1 s, jittered, within the call's deadline. */
export interface RetryPolicy {
  retries: number;
  /** Absolute time (Date.now()) after which no attempt starts. */
  deadline?: number | undefined;
}

/**
 * Runs `attempt` until it succeeds, fails with an error that is not retryable, or the retries or
 * the deadline run out. After TROUPE_ERR_CONNECTION_CLOSED it also waits (bounded) for the
 * connection to come back, so a head restart costs a retry, not a failure.
 */
export async function withRetries<T>(conn: HeadConnection, policy: RetryPolicy, attempt: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof TroupeError) || !err.retryable || i >= policy.retries) throw err;
      const delay = Math.round(Math.min(50 * 2 ** i, 1000) * (0.8 + 0.4 * Math.random()));
      const left = policy.deadline === undefined ? Infinity : policy.deadline - Date.now();
      if (left <= delay) throw err;
      await new Promise((resolve) => setTimeout(resolve, delay));
      if (err.code === 'TROUPE_ERR_CONNECTION_CLOSED') await conn.whenConnected(Math.min(left - delay, MAX_RECONNECT_MS * 2));
    }
  }
}
