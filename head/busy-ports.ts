import { createServer } from 'node:net';
import { TroupeError } from '../runtime/internal.js';

/**
 * A head takes two ports (HTTP, and gRPC beside it). When one is taken, the operator should learn
 * at once about both, and how to move them together: a start that named only the gRPC port, then
 * the HTTP one on the next try, took two restarts to find what one message can say.
 */
export function portsRefused(refusals: readonly string[]): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_BAD_FLAG',
    `${refusals.join('; ')}. To move both, give --port P alone (or TROUPE_PORT=P): gRPC then listens on P+1 unless --grpc-port (or TROUPE_GRPC_PORT) says otherwise; --no-grpc serves no gRPC`,
  );
}

/** Why `port` on `host` cannot be listened on now (undefined: it can): asked once the other port failed. */
export function listenRefusal(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err) => resolve((err as Error).message));
    probe.listen(port, host, () => probe.close(() => resolve(undefined)));
  });
}

/** The HTTP port's half of the message, worded as the gRPC endpoint words its own. */
export function httpRefusal(host: string, port: number, why: string): string {
  return `cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port}: ${why} (see --port)`;
}
