import { readFileSync } from 'node:fs';
import { checkServerIdentity, createSecureContext } from 'node:tls';
import type { ConnectionOptions, PeerCertificate } from 'node:tls';
import { TroupeError } from '../errors.js';

/** PEM text or bytes, as Node's `tls` options take them. */
export type Pem = string | Buffer;

/** What a process that connects over TLS trusts and presents (the SDK's `tls`, an agent's `--tls-*`). */
export interface TlsClientOptions {
  /** CA certificates that sign the server's (default: Node's bundled roots). */
  ca?: Pem;
  /** A client certificate and its key, for a head that asks agents for one (`--tls-agent-ca`). */
  cert?: Pem;
  key?: Pem;
}

/** A certificate and key a server presents; the replicas' direct ports present the head's. */
export interface TlsIdentity {
  cert: Pem;
  key: Pem;
}

/** Whether `url` is reached over TLS (`https:`, `wss:`): then no byte may cross in clear. */
export function isSecureUrl(url: URL | string): boolean {
  const protocol = typeof url === 'string' ? new URL(url).protocol : url.protocol;
  return protocol === 'https:' || protocol === 'wss:';
}

/** Reads a PEM file named by `what` (a flag, an option); TROUPE_ERR_BAD_TLS naming both when it cannot. */
export function readPem(what: string, path: string): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_TLS',
      `${what}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  if (!bytes.includes('-----BEGIN ')) throw new TroupeError('TROUPE_ERR_BAD_TLS', `${what}: ${path} holds no PEM block`);
  return bytes;
}

/**
 * Builds a TLS context from `options` once, so a key that does not match its certificate, or text
 * that is not PEM, is said at start (TROUPE_ERR_BAD_TLS naming `what`) rather than at the first
 * handshake. OpenSSL's reason is kept; the key's bytes are never part of the message.
 */
export function checkTlsMaterial(what: string, options: { cert?: Pem; key?: Pem; ca?: Pem }): void {
  if ((options.cert === undefined) !== (options.key === undefined))
    throw new TroupeError('TROUPE_ERR_BAD_TLS', `${what}: a certificate needs its key, and a key its certificate`);
  try {
    createSecureContext(options);
  } catch (err) {
    const reason = (err as { reason?: string }).reason ?? (err as Error).message;
    throw new TroupeError('TROUPE_ERR_BAD_TLS', `${what}: ${reason}`);
  }
}

/**
 * How a client reaches a replica's direct port under TLS. The replica presents the head's own
 * certificate, which the head handed it over its encrypted link (docs/security.md): the client
 * checks it against its CA, and against the head's host name rather than the replica's address,
 * so a replica on any node passes without a certificate naming that node, and only a process the
 * head gave its key can.
 */
export function replicaTlsOptions(client: TlsClientOptions, headHost: string): ConnectionOptions {
  const bare = headHost.replace(/^\[(.*)\]$/, '$1');
  return {
    ...(client.ca !== undefined ? { ca: client.ca } : {}),
    rejectUnauthorized: true,
    checkServerIdentity: (_host: string, cert: PeerCertificate) => checkServerIdentity(bare, cert),
  };
}
