import { Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { checkedBy, ERRORS, requestFailed } from '../../runtime/internal.js';
import type { HttpError, Logger } from '../../runtime/internal.js';
import type { z } from 'zod';
import { checkDecoded } from './malformed.js';

/**
 * Errors as gRPC statuses: the code each TROUPE_ERR_* code's HTTP status stands for, and the
 * TROUPE_ERR_* code at the head of the message ("TROUPE_ERR_OVERLOADED: ..."), so a gRPC caller
 * matches on it as an HTTP caller matches on the JSON body's `code`. Retryable errors carry
 * `retry-after` in the trailers, as HTTP's 429 and 503 carry the header.
 */

const BY_HTTP_STATUS: Record<number, status> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  403: status.PERMISSION_DENIED,
  404: status.NOT_FOUND,
  409: status.FAILED_PRECONDITION,
  410: status.FAILED_PRECONDITION,
  413: status.RESOURCE_EXHAUSTED,
  415: status.INVALID_ARGUMENT,
  422: status.FAILED_PRECONDITION,
  429: status.RESOURCE_EXHAUSTED,
  500: status.INTERNAL,
  501: status.UNIMPLEMENTED,
  502: status.UNAVAILABLE,
  503: status.UNAVAILABLE,
  504: status.DEADLINE_EXCEEDED,
  507: status.RESOURCE_EXHAUSTED,
};

export function grpcCodeOf(httpStatus: number): status {
  return BY_HTTP_STATUS[httpStatus] ?? (httpStatus >= 500 ? status.INTERNAL : status.INVALID_ARGUMENT);
}

/** The status message: the TROUPE_ERR_* code, then what went wrong. */
export function statusMessage(error: HttpError): string {
  return `${error.code}: ${error.message}`;
}

export function serviceError(error: HttpError): Partial<ServiceError> {
  const metadata = new Metadata();
  if (ERRORS[error.code].retryable) metadata.set('retry-after', '1');
  return { code: grpcCodeOf(error.status), details: statusMessage(error), metadata };
}

/** Any thrown value as the HTTP API would answer it (a bug is logged there), then as a gRPC status. */
export function failure(log: Logger, err: unknown, method: string, maxBytes: number): HttpError {
  return requestFailed(log, err, { method: 'gRPC', url: method }, maxBytes);
}

/** A request message checked with `schema`, or TROUPE_ERR_BAD_REQUEST naming the first field that does not fit. */
export function parseMessage<T>(schema: z.ZodType<T>, message: unknown, what: string): T {
  checkDecoded(message);
  return checkedBy(schema, message, what);
}
