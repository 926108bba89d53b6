import { HEADER_LENGTH, InferRequestSchema, decodeBody, encodeBody, inferResponse, responseCodingFor } from '../../runtime/internal.js';
import type { Params } from '../../runtime/internal.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { readinessBody, serverReadiness } from '../control/readiness.js';
import { ReadinessBodySchema } from './probe-routes.js';
import { bodyBuffer } from './body.js';
import type { ApiContext } from './context.js';
import { EXTENSIONS, modelMetadata, modelReadiness } from './oip-models.js';
import { TROUPE_VERSION } from './openapi.js';
import { stateBackend } from './state-backend.js';

/**
 * The Open Inference Protocol (KServe v2) endpoints, where every deployment is a "model" with one
 * version, "1". Health is in the status code, as the protocol asks (200 is true, 4xx false); the
 * server's live and ready answers also carry the small JSON body KServe's server sends and its
 * REST client reads, and a server that is not ready says why in it. A model's ready has no body.
 */

const LiveSchema = z.object({ live: z.literal(true) });
const TensorMetadataSchema = z.object({ name: z.string(), datatype: z.string(), shape: z.array(z.number()) });
const ServerMetadataSchema = z.object({ name: z.string(), version: z.string(), extensions: z.array(z.string()) });
const ModelMetadataSchema = z.object({
  name: z.string(),
  versions: z.array(z.string()),
  platform: z.string(),
  inputs: z.array(TensorMetadataSchema),
  outputs: z.array(TensorMetadataSchema),
});
const InferResponseSchema = z.object({
  model_name: z.string(),
  model_version: z.string(),
  id: z.string().optional(),
  outputs: z.array(
    TensorMetadataSchema.extend({ parameters: z.record(z.string(), z.unknown()).optional(), data: z.array(z.unknown()).optional() }),
  ),
});

/** The request headers of an inference (and an async job's submission). */
export const INFER_REQUEST_HEADERS = {
  'inference-header-content-length':
    "the binary tensor data extension: the JSON request's length in bytes, the inputs' bytes after it; 0: a raw binary body (the one input's bytes)",
  'content-encoding': 'gzip or deflate: the body is decoded first (the body limit applies to the decoded bytes); any other coding is 415',
  'accept-encoding': 'gzip or deflate: a response of 1 KiB or more comes compressed (the highest q among gzip, deflate, identity)',
};

export function registerOipRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const { docs, state } = ctx;
  const tag = 'Open Inference Protocol (v2)';
  const backend = stateBackend(state, ctx.graphs);

  docs.route(
    app,
    {
      method: 'GET',
      url: '/v2/health/live',
      tag,
      auth: 'read',
      summary: 'Server live',
      responses: { 200: { description: 'live', schema: LiveSchema } },
    },
    // The protocol words health in status codes (Triton's clients read only those); KServe's own
    // server also answers {"live": true}, and KServe's REST client reads that body.
    async () => ({ live: true }),
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/v2/health/ready',
      tag,
      auth: 'read',
      summary: 'Server ready: a node is alive and the head is not shutting down (each model says its own at /v2/models/{name}/ready)',
      responses: {
        200: { description: 'ready', schema: ReadinessBodySchema },
        400: { description: 'not ready, and why', schema: ReadinessBodySchema },
      },
    },
    async (_req, reply) => {
      const readiness = serverReadiness(state, ctx.draining());
      // The same body as /readyz, with the protocol's status codes: KServe's REST client reads
      // its "ready"; a person (or a Triton client's log) sees why not.
      return reply.code(readiness.ready ? 200 : 400).send(readinessBody(readiness));
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/v2',
      tag,
      auth: 'read',
      summary: 'Server metadata',
      responses: { 200: { description: 'server metadata', schema: ServerMetadataSchema } },
    },
    async () => ({
      name: 'troupe',
      version: TROUPE_VERSION,
      extensions: EXTENSIONS,
    }),
  );

  const metadata = async (request: FastifyRequest) => modelMetadata(state, ctx.graphs, request.params as Params);
  const ready = async (request: FastifyRequest, reply: FastifyReply) => {
    const readiness = await modelReadiness(state, ctx.graphs, request.params as Params);
    return reply.code(readiness === 'ready' ? 200 : readiness === 'unknown' ? 404 : 400).send();
  };
  const infer = async (request: FastifyRequest, reply: FastifyReply) => {
    const body = await decodeBody(bodyBuffer(request.body), request.headers, ctx.maxBodyBytes);
    const response = await inferResponse(backend, request.params as Params, request.headers[HEADER_LENGTH], body);
    if (response.headerLength !== undefined) reply.header('inference-header-content-length', String(response.headerLength));
    const coding = responseCodingFor(response.body, request.headers['accept-encoding']);
    if (coding) reply.header('content-encoding', coding);
    return reply
      .code(200)
      .type(response.contentType)
      .send(coding ? await encodeBody(response.body, coding) : response.body);
  };

  for (const prefix of ['/v2/models/:name', '/v2/models/:name/versions/:version']) {
    const versioned = prefix.includes(':version');
    const suffix = versioned ? ' (the one version is "1")' : '';
    docs.route(
      app,
      {
        method: 'GET',
        url: prefix,
        tag,
        auth: 'read',
        summary: `Model metadata${suffix}`,
        responses: { 200: { description: 'model metadata', schema: ModelMetadataSchema } },
      },
      metadata,
    );
    docs.route(
      app,
      {
        method: 'GET',
        url: `${prefix}/ready`,
        tag,
        auth: 'read',
        summary: `Model ready${suffix}`,
        responses: {
          200: { description: 'ready (no body)' },
          400: { description: 'not ready (no body)' },
          404: { description: 'unknown model (no body)' },
        },
      },
      ready,
    );
    docs.route(
      app,
      {
        method: 'POST',
        url: `${prefix}/infer`,
        tag,
        auth: 'inference',
        summary: `Inference${suffix}`,
        description:
          'JSON tensors ("data" nested or flat, row-major), or the binary tensor data extension: the JSON request is the first ' +
          'Inference-Header-Content-Length bytes, each input with parameters.binary_data_size is read from the bytes after it in order. ' +
          'Outputs come back binary when their parameters.binary_data (or the request parameter binary_data_output) is true; the response is then ' +
          'application/octet-stream with its own Inference-Header-Content-Length. parameters.timeout (microseconds) sets a deadline (504). ' +
          "Inference-Header-Content-Length: 0 is a raw binary request: the whole body is the one input's bytes (shape from the model, its variable dimension " +
          'from the byte length), and every output comes back binary. Content-Encoding gzip or deflate bodies are decoded (the limit applies to the decoded bytes), ' +
          'any other coding is refused (415); Accept-Encoding gzip or deflate compresses a response of 1 KiB or more. An output with parameters.classification k comes back as ' +
          'BYTES [batch, k] "score:index[:label]" strings (Triton\'s classification extension).',
        headers: INFER_REQUEST_HEADERS,
        body: {
          content: { 'application/json': InferRequestSchema, 'application/octet-stream': 'binary' },
          description:
            "JSON; or binary: the JSON request (this schema) in the first Inference-Header-Content-Length bytes, then the inputs' bytes in order; " +
            "or raw binary with Inference-Header-Content-Length: 0, the one input's bytes alone",
        },
        responses: {
          200: {
            description:
              'the outputs: JSON (this schema), or application/octet-stream where an output is binary: the JSON response (this schema) in the first ' +
              "Inference-Header-Content-Length bytes, then each binary output's bytes in order (parameters.binary_data_size)",
            content: { 'application/json': InferResponseSchema, 'application/octet-stream': 'binary' },
            headers: {
              'inference-header-content-length': 'a binary response: the length of its JSON part (of the uncompressed body)',
              'content-encoding': 'gzip or deflate when Accept-Encoding asked for it and the body is 1 KiB or more',
            },
          },
        },
      },
      infer,
    );
  }
}
