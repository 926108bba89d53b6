import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { z } from 'zod';
import type { AuthPolicy } from '../../runtime/internal.js';
import { TroupeError } from '../../runtime/internal.js';

/**
 * The head's OpenAPI 3.1 description, built from the same zod schemas the handlers validate with
 * (zod 4's `z.toJSONSchema`). Routes are declared once through {@link ApiDocs.route}, which both
 * registers them with fastify and records them here; routes served ahead of fastify (the
 * inference fast path, front-door workers) answer on URLs declared here too. {@link ApiDocs.watch}
 * sees every route fastify registers, so one registered any other way is caught
 * ({@link ApiDocs.undocumented}; the head refuses to start with one). Schemas deliberately stay
 * out of fastify's own `schema` option: that would make fastify validate with ajv and serialise
 * with fast-json-stringify too, with its own messages and silent dropping of undeclared fields.
 */

export const TROUPE_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
})();

export const ErrorBodySchema = z.object({ error: z.string(), code: z.string().regex(/^TROUPE_ERR_[A-Z_]+$/) });

/** One representation of a body: JSON (or YAML) described by a zod schema, raw bytes, or text. */
export type Representation = z.ZodType | 'binary' | 'text';

export interface ResponseDoc {
  description: string;
  /** Shorthand for `content: {'application/json': schema}`. */
  schema?: z.ZodType;
  /** Each media type the answer may come in (a binary inference response beside its JSON one). */
  content?: Record<string, Representation>;
  /** Response headers worth knowing (Location, Inference-Header-Content-Length, Allow ...), with what they say. */
  headers?: Record<string, string>;
}

export interface BodyDoc {
  content: Record<string, Representation>;
  description?: string;
  /** Default true. */
  required?: boolean;
}

export interface RouteDoc {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  /** fastify style: `/v2/models/:name`; a trailing `*` is the path parameter `path`. */
  url: string;
  summary: string;
  tag: string;
  auth: AuthPolicy;
  description?: string;
  query?: Record<string, string>;
  /** Request headers the route reads, with what they mean. */
  headers?: Record<string, string>;
  body?: BodyDoc;
  responses: Record<number, ResponseDoc>;
}

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Methods fastify adds by itself: HEAD answers every GET (exposeHeadRoutes). */
const IMPLIED = new Set(['HEAD']);

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

function mediaType(representation: Representation, io: 'input' | 'output'): Record<string, unknown> {
  if (representation === 'binary') return { schema: { type: 'string', format: 'binary' } };
  if (representation === 'text') return { schema: { type: 'string' } };
  return { schema: jsonSchema(representation, io) };
}

function content(entries: Record<string, Representation>, io: 'input' | 'output'): Record<string, unknown> {
  return Object.fromEntries(Object.entries(entries).map(([type, r]) => [type, mediaType(r, io)]));
}

/** `/v2/models/:name` -> `/v2/models/{name}`; `/status/assets/*` -> `/status/assets/{path}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{path}');
}

function pathParameters(url: string): string[] {
  return [...[...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!), ...(url.endsWith('*') ? ['path'] : [])];
}

function operation(r: RouteDoc): Record<string, unknown> {
  const parameters = [
    ...pathParameters(r.url).map((name) => ({
      name,
      in: 'path',
      required: true,
      schema: { type: 'string' },
      ...(name === 'path' && r.url.endsWith('*') ? { description: 'the rest of the path ("/" included)' } : {}),
    })),
    ...Object.entries(r.query ?? {}).map(([name, description]) => ({
      name,
      in: 'query',
      required: false,
      description,
      schema: { type: 'string' },
    })),
    ...Object.entries(r.headers ?? {}).map(([name, description]) => ({
      name,
      in: 'header',
      required: false,
      description,
      schema: { type: 'string' },
    })),
  ];
  const responses: Record<string, unknown> = {};
  for (const [status, res] of Object.entries(r.responses)) {
    const entries = { ...(res.schema ? { 'application/json': res.schema } : {}), ...res.content };
    responses[status] = {
      description: res.description,
      ...(res.headers
        ? {
            headers: Object.fromEntries(
              Object.entries(res.headers).map(([name, description]) => [name, { description, schema: { type: 'string' } }]),
            ),
          }
        : {}),
      ...(Object.keys(entries).length ? { content: content(entries, 'output') } : {}),
    };
  }
  responses.default = {
    description: 'An error: 4xx or 5xx with a TROUPE_ERR_* code (docs/errors.md); 405 names the allowed methods in Allow',
    content: { 'application/json': { schema: jsonSchema(ErrorBodySchema, 'output') } },
  };
  return {
    summary: r.summary,
    tags: [r.tag],
    ...(r.description ? { description: r.description } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(r.body
      ? {
          requestBody: {
            required: r.body.required ?? true,
            ...(r.body.description ? { description: r.body.description } : {}),
            content: content(r.body.content, 'input'),
          },
        }
      : {}),
    responses,
    ...(r.auth === 'read' ? {} : { security: [{ bearer: [] }] }),
  };
}

export class ApiDocs {
  readonly #routes: RouteDoc[] = [];
  /** Every route fastify registered (method and url), once watched. */
  readonly #registered: { method: string; url: string }[] = [];

  /** Records every route `app` (and every scope under it) registers from now on, however it is registered. */
  watch(app: FastifyInstance): void {
    app.addHook('onRoute', (route: RouteOptions) => {
      for (const method of [route.method].flat()) this.#registered.push({ method, url: route.url });
    });
  }

  /** Registers a route on `app` and records its description. */
  route(app: FastifyInstance, doc: RouteDoc, handler: Handler): void {
    this.#routes.push(doc);
    app.route({ method: doc.method, url: doc.url, config: { auth: doc.auth }, handler });
  }

  /** Routes fastify serves that the document does not describe ("GET /x"), since {@link watch}. */
  undocumented(): string[] {
    const described = new Set(this.#routes.map((r) => `${r.method} ${r.url}`));
    return this.#registered
      .filter((r) => !IMPLIED.has(r.method) && !described.has(`${r.method} ${r.url}`))
      .map((r) => `${r.method} ${r.url}`);
  }

  /** Throws if a route is undocumented: a bug every test of the head meets at once. */
  checkComplete(): void {
    const missing = this.undocumented();
    if (missing.length > 0)
      throw new TroupeError(
        'TROUPE_ERR_INTERNAL',
        `routes missing from the OpenAPI document (head/http/openapi.ts): ${missing.join(', ')}`,
      );
  }

  document(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const r of this.#routes) (paths[openApiPath(r.url)] ??= {})[r.method.toLowerCase()] = operation(r);
    return {
      openapi: '3.1.0',
      info: {
        title: 'Troupe head',
        version: TROUPE_VERSION,
        description:
          "Deploy ONNX models and call them with the Open Inference Protocol (KServe v2, with the binary tensor data extension and Triton's extensions). " +
          'Errors are {"error": message, "code": "TROUPE_ERR_*"}; a known path asked with another method is 405 with Allow. ' +
          "With a cluster token, 'write' endpoints need it always and inference needs it when the head listens beyond loopback.",
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      paths,
    };
  }
}
