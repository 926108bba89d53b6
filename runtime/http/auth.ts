import type { IncomingHttpHeaders } from 'node:http';
import { checkBearer } from '../transport/bearer.js';
import type { HttpError } from './errors.js';

/**
 * Who must present the cluster token (`Authorization: Bearer …`) when the head has one:
 * - `read`: nobody (health, metadata, listings);
 * - `write`: everyone (every endpoint that changes the cluster, and model bytes);
 * - `inference`: callers of a head that listens beyond loopback; on loopback only local
 *   processes can reach it, and they could read the token anyway.
 */
export type AuthPolicy = 'read' | 'write' | 'inference';

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function needsToken(policy: AuthPolicy, token: string | undefined, host: string): boolean {
  if (!token || policy === 'read') return false;
  return policy === 'write' || !isLoopback(host);
}

/**
 * The 401 for a request that lacks the token its route's policy asks for, or undefined when it
 * may go on. `route` is the route's pattern (`/v2/models/:name/infer`), named in the message.
 */
export function authError(
  policy: AuthPolicy,
  token: string | undefined,
  host: string,
  request: { method: string; headers: IncomingHttpHeaders },
  route: string,
): HttpError | undefined {
  if (!needsToken(policy, token, host) || checkBearer(request.headers, token)) return undefined;
  const why = request.headers.authorization === undefined ? 'missing cluster token' : 'wrong cluster token';
  return {
    status: 401,
    code: 'TROUPE_ERR_UNAUTHORIZED',
    message: `${why}: ${request.method} ${route} needs 'Authorization: Bearer <token>'`,
  };
}
