import type { FastifyReply } from 'fastify';
import { ERRORS, TroupeError } from '../../runtime/index.js';
import type { ErrorCode, Logger } from '../../runtime/index.js';

/**
 * Every HTTP error is `{"error": "<what went wrong>", "code": "TROUPE_ERR_*"}` with the code's status:
 * the Open Inference Protocol's `$inference_error_response` is `{"error": $string}`, and the extra
 * `code` lets callers match on something stabler than text.
 */
export interface HttpError {
  status: number;
  code: ErrorCode;
  message: string;
}

/** Seconds a client should wait before retrying a 429 or 503. */
const RETRY_AFTER_S = 1;

function mib(bytes: number): string {
  return `${Math.round((bytes / 2 ** 20) * 10) / 10} MiB`;
}

/** Maps a thrown value (ours, fastify's or anything else) to a status, a code and a message. */
export function toHttpError(err: unknown, bodyLimit: number): HttpError {
  if (err instanceof TroupeError) return { status: err.status, code: err.code, message: err.message };
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'TROUPE_ERR_BODY_TOO_LARGE', message: `the request body is larger than this head accepts (${mib(bodyLimit)}; see --max-body-mib)` };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the request body is shorter or longer than its Content-Length' };
    default:
      break;
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return { status: e.statusCode, code: 'TROUPE_ERR_BAD_REQUEST', message };
  }
  return { status: 500, code: 'TROUPE_ERR_INTERNAL', message };
}

export function sendError(reply: FastifyReply, error: HttpError): FastifyReply {
  if (ERRORS[error.code].retryable && (error.status === 429 || error.status === 503)) reply.header('retry-after', String(RETRY_AFTER_S));
  if (error.code === 'TROUPE_ERR_UNAUTHORIZED') reply.header('www-authenticate', 'Bearer');
  return reply.code(error.status).type('application/json; charset=utf-8').send({ error: error.message, code: error.code });
}

/** The fastify error handler for the API: JSON errors, and a log line for the unexpected ones. */
export function errorHandler(log: Logger, bodyLimit: number) {
  return (err: unknown, request: { method: string; url: string }, reply: FastifyReply): FastifyReply => {
    const error = toHttpError(err, bodyLimit);
    if (error.status >= 500 && error.code === 'TROUPE_ERR_INTERNAL') log.error({ err, method: request.method, url: request.url }, 'HTTP request failed');
    return sendError(reply, error);
  };
}
