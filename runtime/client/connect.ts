import { HeadConnection } from './connection.js';
import { sharedMemoryAddon } from '../shm/addon.js';
import { DEFAULT_POOL_BYTES, SharedTensorPool } from '../shm/tensor-pool.js';
import { DirectRouter } from './router.js';
import { isSecureUrl, readPem, replicaTlsOptions } from '../transport/tls.js';
import type { TlsClientOptions } from '../transport/tls.js';
import { StreamRegistry } from './actor-stream.js';
import { Cluster } from './cluster.js';
import type { ConnectOptions } from './cluster-options.js';

/**
 * The class actor this process is, from the environment its agent gave it (TROUPE_ACTOR_ID and
 * TROUPE_ACTOR_SECRET), or undefined outside one: a client made inside a method tells the head, so
 * that a call to its own busy instance fails at once instead of waiting forever.
 */
function actorIdentity(): { id: string; secret: string } | undefined {
  const id = process.env.TROUPE_ACTOR_ID;
  const secret = process.env.TROUPE_ACTOR_SECRET;
  return id && secret ? { id, secret } : undefined;
}

/**
 * What a client reaching the head over TLS trusts: `options.tls`, else the CA file TROUPE_TLS_CA
 * names, else (in an actor) the CA its agent verifies the head with, else Node's roots.
 */
function clientTls(options: ConnectOptions): TlsClientOptions | undefined {
  if (options.tls) return options.tls;
  const file = process.env.TROUPE_TLS_CA;
  if (file) return { ca: readPem('TROUPE_TLS_CA', file) };
  const inActor = process.env.TROUPE_HEAD_CA;
  return inActor ? { ca: inActor } : undefined;
}

/**
 * Opens a connection to a head at `ws://host:port` (or `http://`, which is rewritten; `wss://`/`https://` over TLS, see {@link ConnectOptions.tls}). It stays
 * up: after a drop it reconnects with back-off, and calls made meanwhile fail with the retryable
 * TROUPE_ERR_CONNECTION_CLOSED, or are retried with `{ retries }`.
 */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Cluster> {
  const wsUrl = new URL('/v1/client', url.replace(/^http/, 'ws'));
  const secure = isSecureUrl(wsUrl);
  const tls = secure ? (clientTls(options) ?? {}) : undefined;
  let conn: HeadConnection | undefined;
  const streams = new StreamRegistry();
  const addon = options.sharedMemory === false ? 'turned off (sharedMemory: false)' : sharedMemoryAddon();
  const sharedMemory = typeof addon === 'string' ? addon : new SharedTensorPool(addon, options.sharedMemoryBytes ?? DEFAULT_POOL_BYTES);
  const router =
    options.direct === false
      ? undefined
      : new DirectRouter(
          (deployment) => conn!.request({ type: 'routes', deployment }, 10_000),
          (loads) => void conn!.request({ type: 'load', loads }, 10_000).catch(() => {}),
          sharedMemory,
          tls && replicaTlsOptions(tls, wsUrl.hostname),
        );
  conn = await HeadConnection.open(wsUrl, {
    token: options.token ?? process.env.TROUPE_TOKEN,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    reconnect: options.reconnect ?? true,
    onPush: (message) => {
      if (message.type === 'routes') router?.update(message.routes);
      else if (message.type === 'streamItem') streams.deliver(message);
    },
    onReconnect: () => router?.reconnected(),
    actor: actorIdentity(),
    tls,
  });
  return new Cluster(conn, options.retries ?? 0, router, streams);
}
