import {
  alignmentPad,
  answerInference,
  bodyTooLarge,
  errorAnswer,
  headerLengthOf,
  inferRoute,
  refusal,
  requestFailed,
} from '../../runtime/internal.js';
import type { HttpAnswer, InferBody, InferExchangeOptions } from '../../runtime/internal.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sharedBufferPool } from '../../runtime/internal.js';

/**
 * The body, whole, or the 413 once it grows past `limit` (the declared length is checked first).
 * A body that came in several chunks is joined into a buffer from the process's pool, not a fresh
 * one: a fresh buffer per large request costs the process collections (V8 counts each as external
 * memory). The join places the bytes after `alignAfter` (the JSON header's length) at an aligned
 * address: a float tensor that starts at an odd byte cannot be viewed as a Float32Array and would
 * be copied once more. Memory still grows only as bytes arrive: a declared length reserves nothing.
 */
function readBody(req: IncomingMessage, limit: number, alignAfter: number): Promise<InferBody> {
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
      const pad = alignmentPad(alignAfter);
      const bytes = sharedBufferPool.take(pad + length).subarray(pad);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(bytes, at);
      resolve({ bytes, pooled: true });
    });
    req.once('error', reject);
  });
}

/**
 * Serves the Open Inference Protocol's inference endpoint, POST
 * /v2/models/{name}[/versions/{version}]/infer, on Node's HTTP server ahead of fastify, under the
 * route's own rules (infer-exchange.ts): refused while the head drains (503), the token where
 * inference needs one (401), bodies up to the limit (413), every error as the API's JSON.
 * fastify's routing, hooks, body parser and reply pipeline cost more than the call's own
 * overhead at concurrency 1 (bench/RESULTS.md history). The fastify route (oip-routes.ts) shares
 * the handler and describes the endpoint in /docs.
 *
 * The returned function takes a request and says whether it served it; others go to fastify.
 */
export function fastInference(options: InferExchangeOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const route = inferRoute(req.method, req.url);
    if (!route) return false;
    const send = (answer: HttpAnswer) => res.writeHead(answer.status, answer.headers).end(answer.body);
    const refused = refusal(options, route, req.url!, req.headers);
    if (refused) {
      send(errorAnswer(refused));
      return true;
    }
    res.once('close', options.gate.enter());
    void readBody(req, options.maxBodyBytes, headerLengthOf(req.headers))
      .then(
        (body) => answerInference(options, route, { url: req.url!, headers: req.headers }, body),
        (err: unknown) => errorAnswer(requestFailed(options.log, err, req, options.maxBodyBytes)),
      )
      .then(send);
    return true;
  };
}
