import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuthPolicy } from '../../runtime/internal.js';

/**
 * The API's OpenAPI 3.1 description, built from the same zod schemas the handlers validate with
 * (zod 4's `z.toJSONSchema`). Routes are declared once through {@link ApiDocs.route}, which both
 * registers them with fastify and records them here. Schemas deliberately stay out of fastify's
 * own `schema` option: that would make fastify validate with ajv and serialise with
 * fast-json-stringify too, with its own messages and silent dropping of undeclared fields.
 */

export const TROUPE_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
})();

export const ErrorBodySchema = z.object({ error: z.string(), code: z.string() });

export interface RouteDoc {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  /** fastify style: `/v2/models/:name`. */
  url: string;
  summary: string;
  tag: string;
  auth: AuthPolicy;
  description?: string;
  query?: Record<string, string>;
  body?: { contentTypes: string[]; schema?: z.ZodType; description?: string };
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
}

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

export class ApiDocs {
  readonly #routes: RouteDoc[] = [];

  /** Registers a route on `app` and records its description. */
  route(app: FastifyInstance, doc: RouteDoc, handler: Handler): void {
    this.#routes.push(doc);
    app.route({ method: doc.method, url: doc.url, config: { auth: doc.auth }, handler });
  }

  document(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const r of this.#routes) {
      const path = r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const parameters = [
        ...[...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } })),
        ...Object.entries(r.query ?? {}).map(([name, description]) => ({
          name,
          in: 'query',
          required: false,
          description,
          schema: { type: 'string' },
        })),
      ];
      const responses: Record<string, unknown> = {};
      for (const [status, res] of Object.entries(r.responses)) {
        const type = res.contentType ?? 'application/json';
        responses[status] = {
          description: res.description,
          ...(res.schema ? { content: { [type]: { schema: jsonSchema(res.schema, 'output') } } } : {}),
        };
      }
      responses.default = { description: 'An error', content: { 'application/json': { schema: jsonSchema(ErrorBodySchema, 'output') } } };
      const body = r.body
        ? {
            requestBody: {
              required: true,
              ...(r.body.description ? { description: r.body.description } : {}),
              content: Object.fromEntries(
                r.body.contentTypes.map((t) => [t, r.body?.schema ? { schema: jsonSchema(r.body.schema, 'input') } : {}]),
              ),
            },
          }
        : {};
      (paths[path] ??= {})[r.method.toLowerCase()] = {
        summary: r.summary,
        tags: [r.tag],
        ...(r.description ? { description: r.description } : {}),
        ...(parameters.length ? { parameters } : {}),
        ...body,
        responses,
        ...(r.auth === 'read' ? {} : { security: [{ bearer: [] }] }),
      };
    }
    return {
      openapi: '3.1.0',
      info: {
        title: 'Troupe head',
        version: TROUPE_VERSION,
        description:
          'Deploy ONNX models and call them with the Open Inference Protocol (KServe v2, with the binary tensor data extension). ' +
          'Errors are {"error": message, "code": "TROUPE_ERR_*"}. With a cluster token, \'write\' endpoints need it always and inference needs it when the head listens beyond loopback.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      paths,
    };
  }
}
