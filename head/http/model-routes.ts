import { createReadStream } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TroupeError } from '../../runtime/internal.js';
import { SHA256_HEX } from '../../runtime/model-ref.js';
import { bodyStream } from './body.js';
import type { ApiContext } from './context.js';
import { ModelRecordSchema, checkModelName } from './model-store.js';

/**
 * Model uploads (`PUT /api/v1/models/{name}` with the .onnx bytes as the body, any content type),
 * their deletion, and the blob endpoint agents fetch uploaded models from, by hash, with the cluster token.
 */
export function registerModelRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const { docs, store } = ctx;
  const tag = 'Models';
  const nameOf = (request: FastifyRequest) => checkModelName((request.params as { name: string }).name);

  docs.route(
    app,
    {
      method: 'PUT',
      url: '/api/v1/models/:name',
      tag,
      auth: 'write',
      summary: 'Upload an .onnx model (streamed, checked by parsing it as ONNX, stored by sha256)',
      description:
        'Deploy it afterwards with PUT /api/v1/deployments/{deployment} and {"model": "<name>"}. 201 when the name is new, 200 when it replaced a model.',
      body: { content: { 'application/octet-stream': 'binary' }, description: 'the bytes of the .onnx file' },
      responses: {
        200: { description: 'replaced', schema: ModelRecordSchema },
        201: { description: 'created', schema: ModelRecordSchema },
      },
    },
    async (request, reply) => {
      const name = nameOf(request);
      const declared = Number(request.headers['content-length'] ?? Number.NaN);
      if (declared > ctx.maxModelBytes) {
        throw new TroupeError(
          'TROUPE_ERR_BODY_TOO_LARGE',
          `model '${name}' is ${declared} bytes; this head accepts up to ${ctx.maxModelBytes} (see --max-model-mib)`,
        );
      }
      const source = bodyStream(request.body);
      if (!source) throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the body is empty: send the bytes of an .onnx file as model '${name}'`);
      const { record, created } = await store.put(name, source, ctx.maxModelBytes);
      return reply.code(created ? 201 : 200).send(record);
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/models',
      tag,
      auth: 'read',
      summary: 'Uploaded models',
      responses: { 200: { description: 'models', schema: z.object({ models: z.array(ModelRecordSchema) }) } },
    },
    async () => ({ models: store.list() }),
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/models/:name',
      tag,
      auth: 'read',
      summary: 'One uploaded model: sha256, size, inputs and outputs',
      responses: { 200: { description: 'the model', schema: ModelRecordSchema } },
    },
    async (request) => {
      const name = nameOf(request);
      const record = store.get(name);
      if (!record) throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `no uploaded model named '${name}'`);
      return record;
    },
  );

  docs.route(
    app,
    {
      method: 'DELETE',
      url: '/api/v1/models/:name',
      tag,
      auth: 'write',
      summary: 'Delete an uploaded model; its bytes go once no other model name and no deployment uses them',
      description:
        '409 TROUPE_ERR_MODEL_IN_USE, naming them, while a deployment was deployed from this name: delete or redeploy those first.',
      responses: { 200: { description: 'deleted', schema: z.object({ name: z.string(), sha256: z.string(), deleted: z.literal(true) }) } },
    },
    async (request) => {
      const record = await store.delete(nameOf(request));
      return { name: record.name, sha256: record.sha256, deleted: true as const };
    },
  );

  docs.route(
    app,
    {
      method: 'GET',
      url: '/api/v1/blobs/:sha256',
      tag,
      auth: 'write',
      summary: "An uploaded model's bytes by sha256 (what agents fetch; needs the cluster token when there is one)",
      responses: { 200: { description: 'the .onnx bytes', content: { 'application/octet-stream': 'binary' } } },
    },
    async (request, reply) => {
      const { sha256 } = request.params as { sha256: string };
      if (!SHA256_HEX.test(sha256))
        throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `'${sha256.slice(0, 80)}' is not a sha256 (64 lowercase hex digits)`);
      const blob = await store.blob(sha256);
      if (!blob) throw new TroupeError('TROUPE_ERR_UNKNOWN_MODEL', `no uploaded model has sha256 ${sha256}`);
      return reply.type('application/octet-stream').header('content-length', String(blob.bytes)).send(createReadStream(blob.path));
    },
  );
}
