import type { FastifyReply, FastifyRequest } from 'fastify';
import { authError } from '../../runtime/internal.js';
import type { AuthPolicy } from '../../runtime/internal.js';
import { sendError } from './errors.js';

export interface RouteConfig {
  auth: AuthPolicy;
}

/**
 * An onRequest hook, so an unauthenticated request is refused before its body is read. Routes
 * without a policy count as `write`: forgetting one fails closed.
 */
export function authHook(token: string | undefined, host: string) {
  return (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    const policy = (request.routeOptions.config as Partial<RouteConfig> | undefined)?.auth ?? 'write';
    const refused = authError(policy, token, host, request, request.routeOptions.url ?? request.url);
    // A hook that answers does not call done().
    if (refused) void sendError(reply, refused);
    else done();
  };
}
