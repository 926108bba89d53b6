import { createServer } from 'node:http';
import type { IncomingMessage, RequestListener, Server, ServerOptions } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { TroupeError, checkTlsMaterial } from '../runtime/internal.js';
import type { HeadOptions, HeadTlsOptions } from './head-options.js';

/**
 * A certificate that cannot be used is said at start, and so is a setting TLS rules out: front-door
 * workers and handoff move raw connections between processes, and a TLS session cannot move with
 * its descriptor (its keys live in the process that made the handshake).
 */
export function checkHeadTls(options: HeadOptions): void {
  const { tls } = options;
  if (!tls) return;
  checkTlsMaterial('--tls-cert/--tls-key', { cert: tls.cert, key: tls.key });
  if (tls.agentCa !== undefined) checkTlsMaterial('--tls-agent-ca', { ca: tls.agentCa });
  if (options.httpHandoff)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', '--http-handoff cannot be used with TLS: a TLS connection cannot be handed to a replica');
  if (options.httpWorkers !== undefined && options.httpWorkers > 0)
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      '--http-workers cannot be above 0 with TLS: a TLS connection cannot be handed to a worker (the head serves every request)',
    );
}

/**
 * The head's HTTP server, HTTPS under TLS: a plaintext request then fails the handshake, and
 * nothing is served in clear. A handshake gets as long as a request head does. With an agent CA,
 * every peer is asked for a certificate but none is refused here: only /v1/agent requires one
 * ({@link agentCertificateRefusal}), so SDK, HTTP and browser callers need none.
 */
export function headServer(
  tls: HeadTlsOptions | undefined,
  options: ServerOptions & { headersTimeout: number },
  serve: RequestListener,
): Server {
  if (!tls) return createServer(options, serve);
  return createHttpsServer(
    {
      ...options,
      cert: tls.cert,
      key: tls.key,
      handshakeTimeout: options.headersTimeout,
      ...(tls.agentCa !== undefined ? { ca: tls.agentCa, requestCert: true, rejectUnauthorized: false } : {}),
    },
    serve,
  );
}

/** Why an agent's upgrade is refused under mutual TLS (no certificate, or one the agent CA did not sign); undefined to accept it. */
export function agentCertificateRefusal(tls: HeadTlsOptions | undefined, req: IncomingMessage): string | undefined {
  if (tls?.agentCa === undefined) return undefined;
  const socket = req.socket as TLSSocket;
  if (socket.authorized) return undefined;
  return socket.authorizationError ? String(socket.authorizationError) : 'no certificate';
}
