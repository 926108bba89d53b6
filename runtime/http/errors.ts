import { ERRORS, TroupeError } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import type { Logger } from '../log.js';

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

/** The error for a body over the head's limit (413). */
export function bodyTooLarge(bodyLimit: number): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_BODY_TOO_LARGE',
    `the request body is larger than this head accepts (${mib(bodyLimit)}; see --max-body-mib)`,
  );
}

/** Maps a thrown value (ours, a web framework's (fastify's codes) or anything else) to a status, a code and a message. */
export function toHttpError(err: unknown, bodyLimit: number): HttpError {
  const e = err as { code?: unknown; statusCode?: unknown; message?: unknown };
  const ours = err instanceof TroupeError ? err : e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? bodyTooLarge(bodyLimit) : undefined;
  if (ours) return { status: ours.status, code: ours.code, message: ours.message };
  const message = typeof e.message === 'string' ? e.message : String(err);
  // Node's error for a request whose client went away mid-body (or was dropped for room): no server fault to log.
  if (e.code === 'ECONNRESET' && message === 'aborted') {
    return { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the connection closed before the request body was whole' };
  }
  if (e.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') {
    return { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the request body is shorter or longer than its Content-Length' };
  }
  // fastify's router names the whole path in these; a 5,000-character one is no help to anyone.
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return {
      status: 414,
      code: 'TROUPE_ERR_BAD_REQUEST',
      message: 'a segment of the path is longer than this server reads (names are at most 63 characters)',
    };
  }
  if (e.code === 'FST_ERR_BAD_URL') {
    return { status: 400, code: 'TROUPE_ERR_BAD_REQUEST', message: 'the path is not a valid URL: a %-escape does not decode' };
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return { status: e.statusCode, code: 'TROUPE_ERR_BAD_REQUEST', message: message.slice(0, 300) };
  }
  return { status: 500, code: 'TROUPE_ERR_INTERNAL', message };
}

/** The 503 a draining head answers requests that would start work with. */
export function drainingError(method: string, url: string): HttpError {
  return {
    status: 503,
    code: 'TROUPE_ERR_SHUTTING_DOWN',
    message: `the head is shutting down and takes no new work (${method} ${url.split('?')[0]!.slice(0, 200)})`,
  };
}

/** The headers and JSON body of an error response. */
export function errorResponse(error: HttpError): { headers: Record<string, string>; body: string } {
  const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
  if (ERRORS[error.code].retryable && (error.status === 429 || error.status === 503)) headers['retry-after'] = String(RETRY_AFTER_S);
  if (error.code === 'TROUPE_ERR_UNAUTHORIZED') headers['www-authenticate'] = 'Bearer';
  return { headers, body: JSON.stringify({ error: error.message, code: error.code }) };
}

/** The error a request failed with, and a log line when it was not one of ours (a bug). */
export function requestFailed(
  log: Logger,
  err: unknown,
  request: { method?: string | undefined; url?: string | undefined },
  bodyLimit: number,
): HttpError {
  const error = toHttpError(err, bodyLimit);
  if (error.status >= 500 && error.code === 'TROUPE_ERR_INTERNAL')
    log.error({ err, method: request.method, url: request.url }, 'HTTP request failed');
  return error;
}
