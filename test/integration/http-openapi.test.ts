import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT } from '../helpers/graphs.js';
import { nodeCall } from '../helpers/http.js';
import type { NodeAnswer } from '../helpers/http.js';
import { mlpBinaryRequest } from '../helpers/mlp-oip.js';
import { AnswerChecker, operationsOf, validateDocument } from '../helpers/openapi-check.js';
import type { OpenApiDocument } from '../helpers/openapi-check.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * The OpenAPI document at /docs against the running head: valid OpenAPI 3.1 by a real validator,
 * and every operation in it called live (a real head with front-door workers, an agent, actors),
 * each answer's status, media type and body checked against what the document says of it. An
 * operation the document lists and nothing here calls fails the test, and a route fastify serves
 * that the document lacks stops the head from starting (head/http/openapi.ts), so the two cannot
 * drift apart silently.
 */

const TOKEN = 'openapi-token-7d1e';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const JSON_TYPE = { 'content-type': 'application/json' };

describe('HTTP: the OpenAPI document describes every route, and every live answer fits it', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let doc: OpenApiDocument;
  let checker: AnswerChecker;
  const called = new Set<string>();
  const problems: string[] = [];

  /** One request on a connection of its own (so /v2 requests meet a front-door worker), checked against `operation`. */
  const check = async (
    operation: string,
    path: string,
    status: number,
    options: { body?: string | Buffer; headers?: Record<string, string> } = {},
  ): Promise<NodeAnswer> => {
    const [method] = operation.split(' ') as [string];
    const answer = await nodeCall(cluster.url, method, path, options);
    assert.equal(answer.status, status, `${method} ${path}: ${answer.body.toString().slice(0, 300)}`);
    called.add(operation);
    const length = answer.headers['inference-header-content-length'];
    problems.push(
      ...checker.problems(operation, {
        status: answer.status,
        contentType: answer.headers['content-type'],
        headerLength: length === undefined ? undefined : Number(length),
        body: answer.body,
      }),
    );
    return answer;
  };

  before(async () => {
    // GRAPH_AGENT: a --module-dir, for the class actors the actor routes call.
    cluster = await startCluster({ headArgs: ['--token', TOKEN], agents: [['--token', TOKEN, ...GRAPH_AGENT]] });
    const put = await nodeCall(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1, cpus: 0.5 }),
      headers: { ...JSON_TYPE, ...AUTH },
    });
    assert.equal(put.status, 201, put.body.toString());
    doc = (await nodeCall(cluster.url, 'GET', '/docs')).json as OpenApiDocument;
    checker = new AnswerChecker(doc);
  });
  after(async () => {
    await cluster?.stop();
  });

  test('the document is valid OpenAPI 3.1 (swagger-parser), with binary inference bodies and their header', async () => {
    assert.equal(doc.openapi, '3.1.0');
    await validateDocument(doc);
    const infer = doc.paths['/v2/models/{name}/infer']!.post as unknown as {
      parameters: { name: string; in: string }[];
      requestBody: { content: Record<string, unknown> };
      responses: Record<string, { content: Record<string, unknown>; headers: Record<string, unknown> }>;
    };
    assert.deepEqual(Object.keys(infer.requestBody.content), ['application/json', 'application/octet-stream']);
    assert.deepEqual(Object.keys(infer.responses['200']!.content), ['application/json', 'application/octet-stream']);
    assert.ok(infer.responses['200']!.headers['inference-header-content-length']);
    assert.ok(infer.parameters.some((p) => p.in === 'header' && p.name === 'inference-header-content-length'));
    for (const path of [
      '/metrics',
      '/healthz',
      '/readyz',
      '/v2/health/live',
      '/v2/health/ready',
      '/api/v1/stream',
      '/api/v1/stream/view',
      '/status/login',
      '/status/assets/{path}',
    ])
      assert.ok(doc.paths[path], `${path} is documented`);
    assert.deepEqual((await nodeCall(cluster.url, 'GET', '/docs/openapi.json')).json, doc);
  });

  test('every documented operation, called live, answers as documented', async () => {
    const x = seededFloats(2 * 64, 3);
    const jsonInfer = JSON.stringify({ inputs: [{ name: 'x', shape: [2, 64], datatype: 'FP32', data: Array.from(x) }] });
    const binary = mlpBinaryRequest(x, 2);

    // Probes, docs and the status page.
    await check('GET /healthz', '/healthz', 200);
    await check('GET /metrics', '/metrics', 200);
    await check('GET /readyz', '/readyz', 200);
    await check('GET /docs', '/docs', 200);
    await check('GET /docs/openapi.json', '/docs/openapi.json', 200);
    await check('GET /', '/', 200);
    await check('GET /status/assets/{path}', '/status/assets/style.css', 200);
    await check('GET /status/assets/{path}', '/status/assets/vendor/uplot.js', 200);
    await check('GET /status/assets/{path}', '/status/assets/nope.css', 404);
    await check('GET /status/session', '/status/session', 200);
    const login = await check('POST /status/login', '/status/login', 204, { body: JSON.stringify({ token: TOKEN }), headers: JSON_TYPE });
    // On loopback the page needs no session (head/status/session.ts): login and logout answer 204 without a cookie.
    assert.equal(login.headers['set-cookie'], undefined);
    await check('POST /status/logout', '/status/logout', 204);
    // The live feed never ends: its first event is enough.
    const stream = await fetch(`${cluster.url}/api/v1/stream`, { headers: AUTH, signal: AbortSignal.timeout(20_000) });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
    const reader = stream.body!.getReader();
    let first = '';
    while (!first.includes('\n\n')) first += Buffer.from((await reader.read()).value ?? []).toString();
    assert.match(first, /data: /);
    called.add('GET /api/v1/stream');
    // The page's view of that stream: a page of nodes and of actors (the viewer id from its first event).
    const viewer = (JSON.parse(/^data: (.*)$/m.exec(first)![1]!) as { viewer: string }).viewer;
    const view = (id: string, limit = 10) =>
      JSON.stringify({
        viewer: id,
        seq: 1,
        nodes: { offset: 0, limit, sort: 'name', descending: false, text: '', state: 'all' },
        actors: { offset: 0, limit, group: 'none', sort: 'name', descending: false, text: 'mlp', state: 'all', deployment: '', node: '' },
      });
    await check('POST /api/v1/stream/view', '/api/v1/stream/view', 204, { body: view(viewer), headers: { ...JSON_TYPE, ...AUTH } });
    await check('POST /api/v1/stream/view', '/api/v1/stream/view', 404, { body: view('nobody'), headers: { ...JSON_TYPE, ...AUTH } });
    await check('POST /api/v1/stream/view', '/api/v1/stream/view', 400, { body: view(viewer, 0), headers: { ...JSON_TYPE, ...AUTH } });
    await reader.cancel();

    // The inference protocol, through a front-door worker (each request opens its own connection).
    await check('GET /v2/health/live', '/v2/health/live', 200);
    await check('GET /v2/health/ready', '/v2/health/ready', 200);
    await check('GET /v2', '/v2', 200);
    await check('GET /v2/models/{name}', '/v2/models/mlp', 200);
    await check('GET /v2/models/{name}', '/v2/models/nope', 404);
    await check('GET /v2/models/{name}/versions/{version}', '/v2/models/mlp/versions/1', 200);
    await check('GET /v2/models/{name}/ready', '/v2/models/mlp/ready', 200);
    await check('GET /v2/models/{name}/ready', '/v2/models/nope/ready', 404);
    await check('GET /v2/models/{name}/versions/{version}/ready', '/v2/models/mlp/versions/1/ready', 200);
    await check('POST /v2/models/{name}/infer', '/v2/models/mlp/infer', 200, { body: jsonInfer, headers: JSON_TYPE });
    await check('POST /v2/models/{name}/infer', '/v2/models/mlp/infer', 200, binary);
    await check('POST /v2/models/{name}/infer', '/v2/models/mlp/infer', 200, {
      body: Buffer.from(x.buffer, x.byteOffset, x.byteLength),
      headers: { 'inference-header-content-length': '0' },
    });
    await check('POST /v2/models/{name}/infer', '/v2/models/mlp/infer', 400, { body: '{"inputs": [', headers: JSON_TYPE });
    await check('POST /v2/models/{name}/versions/{version}/infer', '/v2/models/mlp/versions/1/infer', 200, binary);
    await check('GET /v2/models/{name}/config', '/v2/models/mlp/config', 200);
    await check('GET /v2/models/{name}/versions/{version}/config', '/v2/models/mlp/versions/1/config', 200);
    await check('GET /v2/models/{name}/stats', '/v2/models/mlp/stats', 200);
    await check('GET /v2/models/{name}/versions/{version}/stats', '/v2/models/mlp/versions/1/stats', 200);
    await check('GET /v2/models/stats', '/v2/models/stats', 200);
    await check('POST /v2/repository/index', '/v2/repository/index', 200, { body: '' });

    // Models: upload, read, fetch by hash; a deployment from it, unloaded and loaded again; then both removed.
    const onnx = await readFile(cluster.models.mlp);
    await check('PUT /api/v1/models/{name}', '/api/v1/models/up', 401, { body: onnx });
    const uploaded = await check('PUT /api/v1/models/{name}', '/api/v1/models/up', 201, { body: onnx, headers: AUTH });
    const { sha256 } = uploaded.json as { sha256: string };
    await check('GET /api/v1/models', '/api/v1/models', 200);
    await check('GET /api/v1/models/{name}', '/api/v1/models/up', 200);
    await check('GET /api/v1/blobs/{sha256}', `/api/v1/blobs/${sha256}`, 200, { headers: AUTH });
    const spec = JSON.stringify({ model: 'up', threads: 1, cpus: 0.5 });
    await check('PUT /api/v1/deployments/{name}', '/api/v1/deployments/spare', 201, { body: spec, headers: { ...JSON_TYPE, ...AUTH } });
    await check('PUT /api/v1/deployments/{name}', '/api/v1/deployments/spare', 200, { body: spec, headers: { ...JSON_TYPE, ...AUTH } });
    await check('GET /api/v1/deployments', '/api/v1/deployments', 200);
    await check('GET /api/v1/deployments/{name}', '/api/v1/deployments/spare', 200);
    await check('POST /v2/repository/models/{name}/unload', '/v2/repository/models/spare/unload', 200, { body: '{}', headers: AUTH });
    await check('POST /v2/repository/models/{name}/load', '/v2/repository/models/spare/load', 200, { body: '{}', headers: AUTH });
    await check('GET /api/v1/cluster', '/api/v1/cluster', 200);
    // A rollout between two versions, ended each way.
    const split = JSON.stringify({
      model: 'mlp.onnx',
      threads: 1,
      cpus: 0.25,
      versions: [
        { version: 'a', model: 'mlp.onnx', weight: 50 },
        { version: 'b', model: 'mlp.onnx', weight: 50 },
      ],
    });
    await check('PUT /api/v1/deployments/{name}', '/api/v1/deployments/split', 201, { body: split, headers: { ...JSON_TYPE, ...AUTH } });
    const promote = { body: JSON.stringify({ version: 'b' }), headers: { ...JSON_TYPE, ...AUTH } };
    await check('POST /api/v1/deployments/{name}/promote', '/api/v1/deployments/split/promote', 200, promote);
    await check('POST /api/v1/deployments/{name}/rollback', '/api/v1/deployments/split/rollback', 200, { headers: AUTH });
    await check('DELETE /api/v1/deployments/{name}', '/api/v1/deployments/split', 200, { headers: AUTH });
    await check('DELETE /api/v1/models/{name}', '/api/v1/models/up', 409, { headers: AUTH });
    await check('DELETE /api/v1/deployments/{name}', '/api/v1/deployments/spare', 200, { headers: AUTH });
    await check('DELETE /api/v1/models/{name}', '/api/v1/models/up', 200, { headers: AUTH });

    // Class actors: a method's value, and an async generator's items as server-sent events.
    for (const [name, exported] of [
      ['counter', 'Counter'],
      ['ticker', 'Ticker'],
    ]) {
      const spec = JSON.stringify({ kind: 'class', model: `test/fixtures/classes.js#${exported}`, cpus: 0.1 });
      await check('PUT /api/v1/deployments/{name}', `/api/v1/deployments/${name}`, 201, { body: spec, headers: { ...JSON_TYPE, ...AUTH } });
    }
    const args = (...values: unknown[]) => ({ body: JSON.stringify({ args: values }), headers: { ...JSON_TYPE, ...AUTH } });
    await check('POST /api/v1/actors/{name}/{method}', '/api/v1/actors/counter/add', 200, args(2));
    await check('POST /api/v1/actors/{name}/{method}', '/api/v1/actors/counter/nope', 404, args());
    const items = await check('POST /api/v1/actors/{name}/{method}/stream', '/api/v1/actors/ticker/count/stream', 200, args(3));
    assert.match(items.body.toString(), /event: end/);

    // The generate extension: a model's one answer, and the same as one server-sent event.
    const generate = { body: JSON.stringify({ x: Array.from(x.subarray(0, 64)) }), headers: JSON_TYPE };
    await check('POST /v2/models/{name}/generate', '/v2/models/mlp/generate', 200, generate);
    await check('POST /v2/models/{name}/generate', '/v2/models/nope/generate', 404, generate);
    const answers = await check('POST /v2/models/{name}/generate_stream', '/v2/models/mlp/generate_stream', 200, generate);
    assert.match(answers.body.toString(), /^data: \{"model_name":"mlp"/);
    await check('POST /v2/models/{name}/versions/{version}/generate', '/v2/models/mlp/versions/1/generate', 200, generate);
    await check('POST /v2/models/{name}/versions/{version}/generate', '/v2/models/mlp/versions/9/generate', 404, generate);
    const pinned = await check(
      'POST /v2/models/{name}/versions/{version}/generate_stream',
      '/v2/models/mlp/versions/1/generate_stream',
      200,
      generate,
    );
    assert.match(pinned.body.toString(), /^data: \{"model_name":"mlp","model_version":"1"/);

    // Async jobs.
    const job = await check('POST /api/v1/deployments/{name}/jobs', '/api/v1/deployments/mlp/jobs', 202, {
      body: jsonInfer,
      headers: JSON_TYPE,
    });
    const { id } = job.json as { id: string };
    await check('GET /api/v1/jobs/{id}', `/api/v1/jobs/${id}`, 200);
    // Finished, a DELETE removes it (a running one it would cancel, and keep).
    await waitFor('the job to finish', async () => {
      const { state } = (await nodeCall(cluster.url, 'GET', `/api/v1/jobs/${id}`)).json as { state: string };
      return state === 'SUCCEEDED';
    });
    await check('GET /api/v1/jobs/{id}', `/api/v1/jobs/${id}`, 200);
    await check('DELETE /api/v1/jobs/{id}', `/api/v1/jobs/${id}`, 200);
    await check('GET /api/v1/jobs/{id}', `/api/v1/jobs/${id}`, 404);

    assert.deepEqual(problems, [], 'answers that do not fit the document');
    const uncalled = operationsOf(doc).filter((op) => !called.has(op));
    assert.deepEqual(uncalled, [], 'documented operations this test does not call: add them here');
  });
});
