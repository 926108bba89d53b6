import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { parse as parseYaml } from 'yaml';
import { bodyTooLarge, TroupeError } from '../../runtime/internal.js';
import { decodeBody, firstLine, parseJson, unsupportedCoding } from '../../runtime/internal.js';
import { INLINE_BODY_BYTES } from './body-thread.js';
import { readInTurns } from './read-in-turns.js';
import type { BodyBudget } from './body-budget.js';

/**
 * How the API reads bodies. Each route group runs in its own fastify scope and parses every
 * content type itself: curl sends `-d` bodies as form data, Triton clients send binary inference
 * bodies with any type or none, and fastify's own JSON errors would not name the problem.
 */

/**
 * Every body arrives as one Buffer of at most `limit` bytes (413 beyond it). A body that says its
 * length is copied chunk by chunk, as it arrives, into a buffer of that length: joining the chunks
 * at its end (fastify's `parseAs: 'buffer'`) copied 29 MB in one go on the event loop, and bodies
 * ending together were joined in one turn (14 of them held /healthz for 300 ms). The buffer is an
 * ArrayBuffer of its own (past INLINE_BODY_BYTES), so the body thread (body-thread.ts) takes it without a copy. Read in
 * turns (read-in-turns.ts), so that large bodies arriving together leave the event loop to others,
 * and only as many at once as `budget` holds (body-budget.ts).
 */
export function acceptBuffers(app: FastifyInstance, limit: number, budget: BodyBudget): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const declared = request.headers['content-length'] === undefined ? undefined : Number(request.headers['content-length']);
    if (declared !== undefined && declared > limit) return done(bodyTooLarge(limit));
    // Only a body the thread will take gets a buffer of its own, once the budget has room for it:
    // a small one is joined from Node's pool as before.
    const large = declared !== undefined && Number.isSafeInteger(declared) && declared > INLINE_BODY_BYTES;
    let whole: Buffer | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let giveBack = () => {};
    const finish = (err: Error | null, body?: Buffer) => {
      payload.removeListener('data', onData).removeListener('end', onEnd).removeListener('error', onError);
      giveBack();
      done(err, body);
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > limit) return finish(bodyTooLarge(limit));
      if (whole && size + chunk.length > whole.length) return finish(lengthMismatch());
      if (whole) chunk.copy(whole, size);
      else chunks.push(chunk);
      size += chunk.length;
    };
    const onEnd = () => {
      if (whole && size !== whole.length) return finish(lengthMismatch());
      finish(null, whole ?? Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => finish(err);
    payload.on('data', onData).on('end', onEnd).on('error', onError);
    const turns = readInTurns(payload);
    if (!large) return;
    turns.hold('budget');
    giveBack = budget.take(declared, () => {
      whole = Buffer.allocUnsafeSlow(declared);
      turns.release('budget');
    });
    // A client gone while its body waited, or before it was whole.
    payload.once('close', () => giveBack());
  });
}

const lengthMismatch = () => new TroupeError('TROUPE_ERR_BAD_REQUEST', 'the request body is shorter or longer than its Content-Length');

/** What a deployment body may be: a spec is a few KB, and YAML parsing holds the event loop for each node. */
export const SPEC_BODY_LIMIT = 256 * 2 ** 10;
/** Lines plus flow items of a YAML spec: 2,000 parse in ~20 ms (60,000 took 26 s, the duplicate-key check is quadratic). */
export const SPEC_MAX_NODES = 2000;

function specTooLarge(what: string): TroupeError {
  return new TroupeError('TROUPE_ERR_SPEC_TOO_LARGE', `the deployment body is ${what}; a spec is a few KB`);
}

/**
 * Every body arrives as one Buffer of at most SPEC_BODY_LIMIT bytes, refused with its own code so a
 * client sees the spec bound rather than --max-body-mib (which is sized for tensors). A gzip or
 * deflate body is decoded (the bound applies to what it decodes to), any other coding refused with
 * 415, as inference bodies are: read as it came, a gzip spec failed as bad JSON.
 */
export function acceptSpecBuffers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const tooLarge = () => specTooLarge(`larger than ${SPEC_BODY_LIMIT / 2 ** 10} KiB`);
    if (Number(request.headers['content-length']) > SPEC_BODY_LIMIT) return done(tooLarge());
    const refused = unsupportedCoding(request.headers);
    if (refused) {
      payload.resume();
      return done(new TroupeError(refused.code, refused.message));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let finished = false;
    const finish = (err: Error | null, body?: Buffer) => {
      if (finished) return;
      finished = true;
      payload.removeAllListeners('data');
      if (err) payload.resume(); // drain the rest, so the refusal can be written back
      done(err, body);
    };
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > SPEC_BODY_LIMIT) return finish(tooLarge());
      chunks.push(chunk);
    });
    payload.on('end', () =>
      decodeBody(Buffer.concat(chunks, size), request.headers, SPEC_BODY_LIMIT).then(
        (body) => finish(null, body),
        // Past the bound once decoded: the spec's own bound, not --max-body-mib's, is what was passed.
        (err: unknown) => finish(err instanceof TroupeError && err.code === 'TROUPE_ERR_BODY_TOO_LARGE' ? tooLarge() : (err as Error)),
      ),
    );
    payload.on('error', (err) => finish(err));
  });
}

/** Lines and flow separators: an upper bound on a YAML text's nodes, counted without parsing it. */
function yamlNodeBound(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 44 || c === 91 || c === 123) n++; // \n , [ {
  }
  return n;
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
  // Bounded before parsing: the yaml package's cost grows with nodes (its duplicate-key check quadratically).
  if (yamlNodeBound(text) > SPEC_MAX_NODES) throw specTooLarge(`YAML of more than ${SPEC_MAX_NODES} lines and flow items`);
  try {
    return parseYaml(text, { maxAliasCount: 100 }) as unknown;
  } catch (err) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `the body is not valid ${yaml ? 'YAML' : 'JSON or YAML'}: ${firstLine((err as Error).message)}`,
    );
  }
}
