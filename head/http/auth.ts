import type { FastifyReply, FastifyRequest } from 'fastify';
import { checkBearer, isLoopback } from '../auth.js';
import { sendError } from './errors.js';

/**
 * Who must present the cluster token (`Authorization: Bearer …`) when the head has one:
 * - `read`: nobody (health, metadata, listings);
 * - `write`: everyone (every endpoint that changes the cluster, and model bytes);
 * - `inference`: callers of a head that listens beyond loopback; on loopback only local
 *   processes can reach it, and they could read the token anyway.
 */
export type AuthPolicy = 'read' | 'write' | 'inference';

export interface RouteConfig {
  auth: AuthPolicy;
}

export function needsToken(policy: AuthPolicy, token: string | undefined, host: string): boolean {
  if (!token || policy === 'read') return false;
  return policy === 'write' || !isLoopback(host);
}

/**
 * An onRequest hook, so an unauthenticated request is refused before its body is read. Routes
 * without a policy count as `write`: forgetting one fails closed.
 */
export function authHook(token: string | undefined, host: string) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const policy = (request.routeOptions.config as Partial<RouteConfig> | undefined)?.auth ?? 'write';
    if (!needsToken(policy, token, host) || checkBearer(request.headers, token)) return;
    const why = request.headers.authorization === undefined ? 'missing cluster token' : 'wrong cluster token';
    await sendError(reply, {
      status: 401,
      code: 'TROUPE_ERR_UNAUTHORIZED',
      message: `${why}: ${request.method} ${request.routeOptions.url ?? request.url} needs 'Authorization: Bearer <token>'`,
    });
  };
}
