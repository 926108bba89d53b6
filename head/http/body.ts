import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { parse as parseYaml } from 'yaml';
import { TroupeError } from '../../runtime/index.js';

/**
 * How the API reads bodies. Each route group runs in its own fastify scope and parses every
 * content type itself: curl sends `-d` bodies as form data, Triton clients send binary inference
 * bodies with any type or none, and fastify's own JSON errors would not name the problem.
 */

/** Every body arrives as one Buffer of at most `limit` bytes (413 beyond it). */
export function acceptBuffers(app: FastifyInstance, limit: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_request, body, done) => done(null, body));
}

/** Every body arrives as the request stream, for handlers that stream it somewhere (model uploads). */
export function acceptStreams(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
}

export function bodyBuffer(body: unknown): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.alloc(0);
}

export function bodyStream(body: unknown): Readable | undefined {
  return body && typeof (body as Readable).pipe === 'function' ? (body as Readable) : undefined;
}

function firstLine(message: string): string {
  return message.split('\n')[0]!.slice(0, 300);
}

/** Parses JSON text, naming the problem: `body is not valid JSON: Unexpected token …`. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${what} is not valid JSON: ${firstLine((err as Error).message)}`);
  }
}

/**
 * A JSON or YAML document: YAML when the content type says so; otherwise JSON, falling back to
 * YAML only for text that does not even start like JSON (so broken JSON gets a JSON error).
 */
export function parseDocument(body: Buffer, contentType: string | undefined): unknown {
  const text = body.toString('utf8');
  if (text.trim() === '') throw new TroupeError('TROUPE_ERR_BAD_REQUEST', 'the body is empty: send a JSON or YAML object');
  const yaml = /yaml/i.test(contentType ?? '');
  const looksJson = /^\s*[[{"]/.test(text) || /json/i.test(contentType ?? '');
  if (!yaml && looksJson) return parseJson(text, 'the body');
  try {
    return parseYaml(text, { maxAliasCount: 100 }) as unknown;
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `the body is not valid ${yaml ? 'YAML' : 'JSON or YAML'}: ${firstLine((err as Error).message)}`);
  }
}
