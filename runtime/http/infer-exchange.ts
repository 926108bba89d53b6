import type { IncomingHttpHeaders } from 'node:http';
import { sharedBufferPool } from '../transport/buffer-pool.js';
import type { Logger } from '../log.js';
import type { ShutdownGate } from './shutdown-gate.js';
import { authError } from './auth.js';
import {
  ACCEPTED_REQUEST_CODINGS,
  decodeBody,
  encodeBody,
  isEncoded,
  responseCodingFor,
  unsupportedCoding,
} from '../oip/content-coding.js';
import { drainingError, errorResponse, requestFailed } from './errors.js';
import type { HttpError } from './errors.js';
import type { InferenceBackend, Params } from '../oip/infer-backend.js';
import { inferResponse } from '../oip/infer-response.js';
import { HEADER_LENGTH } from '../oip/binary.js';

/**
 * One inference request as the Open Inference Protocol's endpoint answers it, whichever server
 * read it: Node's HTTP server in the head (fast-infer.ts), or a front-door worker's own reader
 * (head/front-door/). Matching the URL, the route's refusals, and the answer or its error.
 */

const INFER_URL = /^\/v2\/models\/([^/?]+)(?:\/versions\/([^/?]+))?\/infer(?:\?.*)?$/;

/** Binary tensors start at a multiple of this in a body we place, so typed arrays can view them in place. */
export const TENSOR_ALIGNMENT = 8;

export interface InferExchangeOptions {
  backend: InferenceBackend;
  gate: ShutdownGate;
  token: string | undefined;
  host: string;
  maxBodyBytes: number;
  log: Logger;
}

export interface InferRoute {
  params: Params;
  /** The route's pattern, named in messages. */
  route: string;
}

/** A request body and whether it came from the process's pool (then it goes back after a success). */
export interface InferBody {
  bytes: Buffer;
  pooled: boolean;
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | number>;
  body: string | Buffer;
}

/** The inference route a POST to `url` is, or undefined (another route, or an escape that does not decode). */
export function inferRoute(method: string | undefined, url: string | undefined): InferRoute | undefined {
  if (method !== 'POST') return undefined;
  const match = INFER_URL.exec(url ?? '');
  if (!match) return undefined;
  try {
    const params = { name: decodeURIComponent(match[1]!), ...(match[2] ? { version: decodeURIComponent(match[2]) } : {}) };
    return { params, route: match[2] ? '/v2/models/:name/versions/:version/infer' : '/v2/models/:name/infer' };
  } catch {
    return undefined;
  }
}

/**
 * Why the request may not go on before its body is read: the head drains (503), the token is
 * missing (401), or the body comes in a content coding the head does not decode (415).
 */
export function refusal(
  options: InferExchangeOptions,
  route: InferRoute,
  url: string,
  headers: IncomingHttpHeaders,
): HttpError | undefined {
  if (options.gate.draining) return drainingError('POST', url);
  return authError('inference', options.token, options.host, { method: 'POST', headers }, route.route) ?? unsupportedCoding(headers);
}

/** The JSON header's length from Inference-Header-Content-Length, when it is a plain number (0 otherwise). */
export function headerLengthOf(headers: IncomingHttpHeaders): number {
  const value = Number(headers[HEADER_LENGTH]);
  return Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** Where a body of `alignAfter` JSON bytes starts in its buffer so that its binary part is aligned. */
export function alignmentPad(alignAfter: number): number {
  return (TENSOR_ALIGNMENT - (alignAfter % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
}

export function errorAnswer(error: HttpError): HttpAnswer {
  const { headers, body } = errorResponse(error);
  // A refused body is not read on: the connection closes after the answer.
  if (error.status === 413) headers.connection = 'close';
  if (error.code === 'TROUPE_ERR_UNSUPPORTED_ENCODING') headers['accept-encoding'] = ACCEPTED_REQUEST_CODINGS;
  return { status: error.status, headers, body };
}

/**
 * The answer to one inference request. A pooled body goes back once the call succeeded: its
 * actor answered, so the frame carrying the inputs had left this process, and the outputs are
 * the actor's own bytes. After a failure the frame may still wait in a socket's queue (a deadline
 * passed while it was sent), so the buffer is left to the collector.
 *
 * A compressed body is decoded first (content-coding.ts), and the pooled bytes it came in go
 * back at once: the call is made from the decoded copy. The response is compressed when
 * Accept-Encoding asks and it is 1 KiB or more; Inference-Header-Content-Length still counts
 * bytes of the uncompressed body.
 */
export async function answerInference(
  options: InferExchangeOptions,
  route: InferRoute,
  request: { url: string; headers: IncomingHttpHeaders },
  body: InferBody,
): Promise<HttpAnswer> {
  try {
    // Plain bodies and small answers skip the awaits: each costs every request a microtask.
    const bytes = isEncoded(request.headers) ? await decodeBody(body.bytes, request.headers, options.maxBodyBytes) : body.bytes;
    const pooled = body.pooled && bytes === body.bytes;
    if (body.pooled && !pooled) sharedBufferPool.give(body.bytes);
    const response = await inferResponse(options.backend, route.params, request.headers[HEADER_LENGTH], bytes);
    if (pooled) sharedBufferPool.give(bytes);
    const coding = responseCodingFor(response.body, request.headers['accept-encoding']);
    const payload = coding ? await encodeBody(response.body, coding) : response.body;
    const headers: Record<string, string | number> = { 'content-type': response.contentType, 'content-length': Buffer.byteLength(payload) };
    if (response.headerLength !== undefined) headers['inference-header-content-length'] = response.headerLength;
    if (coding) headers['content-encoding'] = coding;
    return { status: 200, headers, body: payload };
  } catch (err) {
    return errorAnswer(requestFailed(options.log, err, { method: 'POST', url: request.url }, options.maxBodyBytes));
  }
}
