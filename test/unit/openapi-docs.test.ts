import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { z } from 'zod';
import { ApiDocs } from '../../head/http/openapi.js';
import { AnswerChecker, validateDocument } from '../helpers/openapi-check.js';
import type { OpenApiDocument } from '../helpers/openapi-check.js';

const answer = (status: number, body: unknown, contentType = 'application/json; charset=utf-8') => ({
  status,
  contentType,
  body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
});

test('a route registered around ApiDocs is named as undocumented; HEAD, implied by GET, is not', async () => {
  const app = Fastify();
  const docs = new ApiDocs();
  docs.watch(app);
  docs.route(
    app,
    { method: 'GET', url: '/known/:id', tag: 't', auth: 'read', summary: 's', responses: { 200: { description: 'd' } } },
    async () => ({}),
  );
  app.get('/sneaky', async () => ({}));
  await app.register(async (scope) => void scope.post('/scoped/*', async () => ({})));
  await app.ready();
  assert.deepEqual(docs.undocumented(), ['GET /sneaky', 'POST /scoped/*']);
  await app.close();
});

test('the checker holds answers to the document: fields, statuses and media types it does not describe are named', async () => {
  const app = Fastify();
  const docs = new ApiDocs();
  docs.route(
    app,
    {
      method: 'GET',
      url: '/things/:name',
      tag: 't',
      auth: 'read',
      summary: 's',
      responses: {
        200: { description: 'a thing', schema: z.object({ name: z.string(), size: z.number() }) },
        204: { description: 'nothing' },
      },
    },
    async () => ({}),
  );
  const doc = docs.document() as OpenApiDocument;
  await validateDocument(doc);
  const checker = new AnswerChecker(doc);
  const op = 'GET /things/{name}';
  assert.deepEqual(checker.problems(op, answer(200, { name: 'a', size: 1 })), []);
  assert.match(checker.problems(op, answer(200, { name: 'a' }))[0]!, /must have required property 'size'/);
  assert.match(checker.problems(op, answer(200, { name: 'a', size: 1, extra: true }))[0]!, /additional properties/);
  assert.match(checker.problems(op, answer(202, {}))[0]!, /answered 202, which the document does not list/);
  assert.match(checker.problems(op, answer(200, 'x', 'text/plain'))[0]!, /media type 'text\/plain' is not documented/);
  assert.match(checker.problems(op, answer(204, 'x'))[0]!, /documented without a body/);
  // Errors fall to `default`: {error, code} with a TROUPE_ERR_* code.
  assert.deepEqual(checker.problems(op, answer(404, { error: 'no', code: 'TROUPE_ERR_NOT_FOUND' })), []);
  assert.equal(checker.problems(op, answer(400, { statusCode: 400, error: 'Bad Request', message: 'x' })).length > 0, true);
  await app.close();
});
