import type { IncomingHttpHeaders } from 'node:http';
import { promisify } from 'node:util';
import { deflate, gzip, unzip } from 'node:zlib';
import { TroupeError } from '../errors.js';
import type { HttpError } from '../http/errors.js';

/**
 * HTTP content codings of inference bodies, as Triton's HTTP server and Python client use them:
 * a request body sent with `Content-Encoding: gzip` or `deflate` (tritonclient's
 * `request_compression_algorithm`) is decoded before it is read, and a response is compressed
 * when `Accept-Encoding` prefers gzip or deflate (`response_compression_algorithm`) and it is
 * not tiny (MIN_COMPRESSED_BYTES).
 * Inference-Header-Content-Length counts bytes of the decoded body, both ways.
 *
 * zlib runs on libuv's thread pool, never on the event loop: a 64 MiB body inflates in tens of
 * milliseconds, which would stall every other connection of the process.
 */

export type ContentCoding = 'gzip' | 'deflate';

/** What a 415 answers in Accept-Encoding (RFC 7694): the codings a request body may use. */
export const ACCEPTED_REQUEST_CODINGS = 'gzip, deflate';

const unzipAsync = promisify(unzip);
const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

function headerText(value: string | string[] | undefined): string {
  return (Array.isArray(value) ? value.join(',') : (value ?? '')).trim().toLowerCase();
}

/** The request body's coding: 'identity' for none, gzip or deflate, or undefined for one the head does not decode. */
function requestCoding(headers: IncomingHttpHeaders): ContentCoding | 'identity' | undefined {
  const text = headerText(headers['content-encoding']);
  if (text === '' || text === 'identity') return 'identity';
  if (text === 'gzip' || text === 'x-gzip') return 'gzip';
  if (text === 'deflate') return 'deflate';
  return undefined;
}

/** Whether the body needs decoding (a coding other than identity); a sync check, so plain bodies wait on nothing. */
export function isEncoded(headers: IncomingHttpHeaders): boolean {
  return requestCoding(headers) !== 'identity';
}

/** The 415 for a body in a coding the head does not decode; checked before the body is read. */
export function unsupportedCoding(headers: IncomingHttpHeaders): HttpError | undefined {
  if (requestCoding(headers) !== undefined) return undefined;
  const given = String(headers['content-encoding']).slice(0, 60);
  return {
    status: 415,
    code: 'TROUPE_ERR_UNSUPPORTED_ENCODING',
    message: `Content-Encoding '${given}' is not supported: send the body as gzip, deflate or identity`,
  };
}

/**
 * The body as sent before its content coding, at most `limit` bytes: the same bound as a plain
 * body, so a few KB of gzip cannot become gigabytes (zlib stops at `maxOutputLength`). Both
 * codings accept either a gzip or a zlib stream, as Triton's decompressor does (windowBits 15|32).
 */
export async function decodeBody(body: Buffer, headers: IncomingHttpHeaders, limit: number): Promise<Buffer> {
  const coding = requestCoding(headers);
  if (coding === 'identity') return body;
  if (coding === undefined) {
    const refused = unsupportedCoding(headers)!;
    throw new TroupeError(refused.code, refused.message);
  }
  try {
    return await unzipAsync(body, { maxOutputLength: limit });
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    if (e.code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) {
      throw new TroupeError(
        'TROUPE_ERR_BODY_TOO_LARGE',
        `the ${coding} request body decodes to more than this head accepts (${Math.round((limit / 2 ** 20) * 10) / 10} MiB; see --max-body-mib)`,
      );
    }
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `the request body is not valid ${coding} data (Content-Encoding: ${coding}): ${String(e.message).slice(0, 200)}`,
    );
  }
}

/**
 * The coding to answer in, from Accept-Encoding, by Triton's rule: the listed coding among
 * identity, gzip and deflate with the highest q (1 when not given; the first on a tie), else
 * identity. `*` and codings Triton does not produce are passed over.
 */
export function responseCoding(acceptEncoding: string | string[] | undefined): ContentCoding | undefined {
  let best: string = 'identity';
  let weight = 0;
  for (const part of headerText(acceptEncoding).split(',')) {
    const [name = '', ...params] = part.split(';').map((s) => s.trim());
    const q = params.find((p) => p.startsWith('q='));
    const w = q === undefined ? 1 : Number(q.slice(2));
    if (!Number.isFinite(w)) continue;
    if ((name === 'identity' || name === 'gzip' || name === 'deflate') && w > weight) {
      best = name;
      weight = w;
    }
  }
  return best === 'identity' ? undefined : (best as ContentCoding);
}

/** A response body in `coding` (gzip; deflate is the zlib format, as HTTP means it). */
export function encodeBody(body: string | Buffer, coding: ContentCoding): Promise<Buffer> {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return coding === 'gzip' ? gzipAsync(bytes) : deflateAsync(bytes);
}

/**
 * Responses smaller than this go uncompressed whatever Accept-Encoding says (identity is always
 * acceptable unless refused with q=0, which Triton ignores too): fetch and browsers ask for gzip
 * on every request, and a few hundred bytes of logits would cost a thread-pool round trip to
 * save nothing. fastify's compression plugin draws the line at the same 1 KiB.
 */
export const MIN_COMPRESSED_BYTES = 1024;

/** The coding a response body goes in, from its size and Accept-Encoding; undefined: as it is. */
export function responseCodingFor(body: string | Buffer, acceptEncoding: string | string[] | undefined): ContentCoding | undefined {
  return acceptEncoding !== undefined && Buffer.byteLength(body) >= MIN_COMPRESSED_BYTES ? responseCoding(acceptEncoding) : undefined;
}
