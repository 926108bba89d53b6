import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../runtime/internal.js';
import { readinessBody } from './control/readiness.js';
import type { Readiness } from './control/readiness.js';
import { headServer } from './head-tls.js';
import type { HeadTlsOptions } from './head-options.js';

/** A probe's whole request arrives at once; one that dawdles is dropped. */
const PROBE_TIMEOUT_MS = 5_000;
/** Probes come from an orchestrator, a few at a time: a flood of connections here is turned away, not queued. */
const MAX_PROBE_CONNECTIONS = 64;

export interface ProbeServer {
  /** `http(s)://host:port` of the probe listener. */
  url: string;
  close(): Promise<void>;
}

/**
 * `--probe-port`: `/healthz` and `/readyz` on a listener of their own, as Envoy's admin port or
 * Triton's separate metrics port are, for an orchestrator's liveness and readiness probes. On the
 * head's main port a probe's connection waits in the kernel's accept queue behind every connection
 * that arrived before it: under a burst of thousands (bench/RESULTS-head-survival.md) that queue,
 * not the head's event loop, made a probe late. Here only probes queue, and the head answers them
 * between the main port's turns. The same answers as the main port's routes (no token: they say
 * nothing a caller may not read), the same TLS when the head has it.
 */
export async function startProbeServer(
  host: string,
  port: number,
  tls: HeadTlsOptions | undefined,
  readiness: () => Readiness,
  log: Logger,
): Promise<ProbeServer> {
  const server: Server = headServer(tls && { cert: tls.cert, key: tls.key }, { headersTimeout: PROBE_TIMEOUT_MS }, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const answer = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return answer(405, {
        error: `the probe port answers GET and HEAD, not ${String(req.method).slice(0, 16)}`,
        code: 'TROUPE_ERR_BAD_REQUEST',
      });
    if (path === '/healthz') return answer(200, { status: 'ok' });
    if (path === '/readyz') {
      const now = readiness();
      return answer(now.ready ? 200 : 503, readinessBody(now));
    }
    answer(404, { error: `the probe port serves /healthz and /readyz only, not '${path?.slice(0, 100)}'`, code: 'TROUPE_ERR_NOT_FOUND' });
  });
  server.requestTimeout = PROBE_TIMEOUT_MS;
  server.keepAliveTimeout = PROBE_TIMEOUT_MS;
  server.maxConnections = MAX_PROBE_CONNECTIONS;
  server.setTimeout(PROBE_TIMEOUT_MS, (socket) => socket.destroy());
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  server.on('error', (err) => log.warn({ err: err.message }, 'probe listener error'));
  const bound = server.address() as AddressInfo;
  const url = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
