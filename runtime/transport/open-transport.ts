import { TroupeError } from '../errors.js';
import type { FrameStreamOptions } from './frame-stream.js';
import { asFrameTransport } from './frame-transport.js';
import type { FrameTransport } from './frame-transport.js';
import { UpgradeDeclined, upgradeToFrames } from './frames-upgrade.js';
import { clientSocketOptions } from './socket-options.js';
import type { TlsClientOptions } from './tls.js';

/** How a connection is opened: its frames' bound, its time limit, and what it trusts over TLS. */
type OpenOptions = FrameStreamOptions & { timeoutMs: number; tls?: TlsClientOptions | undefined };

/**
 * Opens a connection to one of the head's endpoints (`/v1/client`, `/v1/actor`). Over plain HTTP
 * (`http:` or `ws:` URLs) it upgrades to a length-prefixed frame stream, whose frames are read in
 * place (over `ws`, a 600 KB image arrives as 64 KB chunks gathered into fresh buffers, twice);
 * a head from before frame streams answers that upgrade with an HTTP error (400 from `ws`), and the
 * connection is made again as a WebSocket, so a newer SDK still reaches an older head. Over TLS
 * (`https:`/`wss:`, a terminating proxy in front of the head) it opens a WebSocket, which such
 * proxies pass, verified against `options.tls.ca` (default: Node's roots); a failed handshake is an
 * error, never a reason to try in clear. Rejects with TROUPE_ERR_UNAUTHORIZED when the head refuses the credentials in
 * `headers`, with TROUPE_ERR_CONNECTION_CLOSED on anything else or after `timeoutMs`.
 */
export async function openFrameTransport(url: URL, headers: Record<string, string>, options: OpenOptions): Promise<FrameTransport> {
  if (url.protocol !== 'ws:' && url.protocol !== 'http:') return openWebSocket(url, headers, options);
  const plain = new URL(url);
  plain.protocol = 'http:';
  try {
    return await upgradeToFrames(plain, headers, options);
  } catch (err) {
    if (!(err instanceof TroupeError) || err.code !== 'TROUPE_ERR_CONNECTION_CLOSED' || !(err.cause instanceof UpgradeDeclined)) throw err;
    plain.protocol = 'ws:';
    return openWebSocket(plain, headers, options);
  }
}

/**
 * A WebSocket to `url` as a frame transport; rejects as {@link openFrameTransport} does. `ws` is
 * loaded here, on first use: most clients never open a WebSocket, and loading it is a fifth of
 * the SDK's import time.
 */
async function openWebSocket(url: URL, headers: Record<string, string>, options: OpenOptions): Promise<FrameTransport> {
  const { WebSocket } = await import('ws');
  const { ca, cert, key } = options.tls ?? {};
  const ws = new WebSocket(url, {
    ...clientSocketOptions(headers),
    maxPayload: options.maxFrameBytes,
    ...(ca !== undefined ? { ca } : {}),
    ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => failed('TROUPE_ERR_CONNECTION_CLOSED', `could not connect to ${url.href} within ${options.timeoutMs} ms`),
      options.timeoutMs,
    );
    const failed = (code: 'TROUPE_ERR_UNAUTHORIZED' | 'TROUPE_ERR_CONNECTION_CLOSED', why: string) => {
      clearTimeout(timer);
      ws.terminate();
      reject(new TroupeError(code, why));
    };
    ws.once('unexpected-response', (_req, res) => {
      const why = res.headers['x-troupe-error'];
      const code = res.statusCode === 401 ? 'TROUPE_ERR_UNAUTHORIZED' : 'TROUPE_ERR_CONNECTION_CLOSED';
      failed(code, `${url.href} refused the connection: HTTP ${res.statusCode}${why ? ` ${String(why)}` : ''}`);
    });
    ws.once('error', (err) => failed('TROUPE_ERR_CONNECTION_CLOSED', `could not connect to ${url.href}: ${err.message}`));
    ws.once('open', () => {
      clearTimeout(timer);
      resolve(asFrameTransport(ws));
    });
  });
}
