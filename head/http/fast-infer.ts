import type { IncomingMessage, ServerResponse } from 'node:http';
import { sharedBufferPool } from '../../runtime/index.js';
import type { Logger } from '../../runtime/index.js';
import type { ShutdownGate } from '../drain.js';
import type { ClusterState } from '../state.js';
import { authError } from './auth.js';
import { bodyTooLarge, drainingError, errorResponse, requestFailed } from './errors.js';
import type { HttpError } from './errors.js';
import { HEADER_LENGTH } from './oip-binary.js';
import { inferResponse } from './oip-routes.js';
import type { Params } from './oip-routes.js';

const INFER_URL = /^\/v2\/models\/([^/?]+)(?:\/versions\/([^/?]+))?\/infer(?:\?.*)?$/;

export interface FastInferenceOptions {
  state: ClusterState;
  gate: ShutdownGate;
  token: string | undefined;
  host: string;
  maxBodyBytes: number;
  log: Logger;
}

interface Body {
  bytes: Buffer;
  /** Taken from the shared pool: give it back once nothing can read it any more. */
  pooled: boolean;
}

/**
 * The body, whole, or the 413 once it grows past `limit` (the declared length is checked first).
 * A body that came in several chunks is joined into a buffer from the process's pool, not a fresh
 * one: with 600 KB images at concurrency 16 on the 2-core machine, a fresh buffer per request cost
 * the head 4.3 ms of CPU an image, most of it in full collections (V8 counts each fresh buffer as
 * external memory); a reused one, 2.1 ms. Memory still grows only as bytes arrive: a declared
 * length reserves nothing.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Body> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length']) > limit) return reject(bodyTooLarge(limit));
    const chunks: Buffer[] = [];
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        req.removeAllListeners('data');
        reject(bodyTooLarge(limit));
      } else chunks.push(chunk);
    });
    req.once('end', () => {
      if (chunks.length === 1) return resolve({ bytes: chunks[0]!, pooled: false });
      const bytes = sharedBufferPool.take(length);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(bytes, at);
      resolve({ bytes, pooled: true });
    });
    req.once('error', reject);
  });
}

/**
 * The response to a request whose body came from the pool, giving the body back once the call
 * succeeded: its actor answered, so the frame carrying the inputs had left this process, and the
 * outputs are the actor's own bytes. After a failure the frame may still wait in a socket's
 * queue (a deadline passed while it was sent), so the buffer is left to the collector.
 */
async function answer(state: ClusterState, params: Params, req: IncomingMessage, body: Body) {
  const response = await inferResponse(state, params, req.headers[HEADER_LENGTH], body.bytes);
  if (body.pooled) sharedBufferPool.give(body.bytes);
  return response;
}

/**
 * Serves the Open Inference Protocol's inference endpoint, POST
 * /v2/models/{name}[/versions/{version}]/infer, on Node's HTTP server ahead of fastify, under the
 * route's own rules: refused while the head drains (503), the token where inference needs one
 * (401), bodies up to the limit (413), every error as the API's JSON. Measured at concurrency 1
 * on the 2-core machine, fastify's routing, hooks, body parser and reply pipeline were about
 * 45 µs of the head's CPU and 30-60 µs of the p50 of a call whose whole overhead is 0.6 ms. The
 * fastify route (oip-routes.ts) shares the handler and describes the endpoint in /docs.
 *
 * The returned function takes a request and says whether it served it; others go to fastify.
 */
export function fastInference(options: FastInferenceOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { state, gate, token, host, maxBodyBytes, log } = options;
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const match = INFER_URL.exec(req.url ?? '');
    if (!match) return false;
    let params: Params;
    try {
      params = { name: decodeURIComponent(match[1]!), ...(match[2] ? { version: decodeURIComponent(match[2]) } : {}) };
    } catch {
      // A malformed escape: fastify's answer to it stands.
      return false;
    }
    const fail = (error: HttpError) => {
      const { headers, body } = errorResponse(error);
      // A refused body is not read on: the connection closes after the answer.
      if (error.status === 413) headers.connection = 'close';
      res.writeHead(error.status, headers).end(body);
    };
    const route = match[2] ? '/v2/models/:name/versions/:version/infer' : '/v2/models/:name/infer';
    const refused = gate.draining ? drainingError('POST', req.url!) : authError('inference', token, host, req as { method: string; headers: IncomingMessage['headers'] }, route);
    if (refused) {
      fail(refused);
      return true;
    }
    res.once('close', gate.enter());
    readBody(req, maxBodyBytes)
      .then((body) => answer(state, params, req, body))
      .then(
        (response) => {
          const headers: Record<string, string | number> = { 'content-type': response.contentType, 'content-length': Buffer.byteLength(response.body) };
          if (response.headerLength !== undefined) headers['inference-header-content-length'] = response.headerLength;
          res.writeHead(200, headers).end(response.body);
        },
        (err: unknown) => fail(requestFailed(log, err, req, maxBodyBytes)),
      );
    return true;
  };
}
