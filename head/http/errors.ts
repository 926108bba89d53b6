import type { FastifyReply } from 'fastify';
import { errorResponse, requestFailed } from '../../runtime/internal.js';
import type { HttpError, Logger } from '../../runtime/internal.js';

export function sendError(reply: FastifyReply, error: HttpError): FastifyReply {
  const { headers, body } = errorResponse(error);
  return reply.code(error.status).headers(headers).send(body);
}

/** The fastify error handler for the API: JSON errors, and a log line for the unexpected ones. */
export function errorHandler(log: Logger, bodyLimit: number) {
  return (err: unknown, request: { method: string; url: string }, reply: FastifyReply): FastifyReply =>
    sendError(reply, requestFailed(log, err, request, bodyLimit));
}
