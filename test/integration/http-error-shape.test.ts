import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, nodeCall, rawExchange } from '../helpers/http.js';
import type { RawResponse } from '../helpers/http.js';

/**
 * Every error answer in the API's shape, `{"error", "code": "TROUPE_ERR_*"}`, whoever gives it:
 * a route, fastify's router (405 for a known path, a 5,000-character name, a broken %-escape),
 * fastify's body parsing (too large, bad JSON, an unknown content type), Node's HTTP parser (a body
 * longer than its Content-Length, a malformed request, a head too large), and a front-door worker
 * (its own refusals, and the requests it relays or hands back to the head).
 */

const JSON_TYPE = { 'content-type': 'application/json' };

/** A raw response that is an error in the API's shape. */
function assertRawError(response: RawResponse | undefined, status: number, message: RegExp): void {
  assert.ok(response, 'a response');
  assertError({ status: response.status, json: response.json }, status, 'TROUPE_ERR_BAD_REQUEST', message);
  assert.match(response.headers['content-type'] ?? '', /^application\/json/);
}

describe('HTTP: errors in the {error, code} shape, 405 with Allow', { timeout: 120_000 }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '1', '--max-body-mib', '1'] });
    const put = await nodeCall(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1, cpus: 0.5 }),
      headers: JSON_TYPE,
    });
    assert.equal(put.status, 201, put.body.toString());
  });
  after(async () => {
    await cluster?.stop();
  });

  test('a known path with another method is 405 naming the methods in Allow; an unknown path is 404', async () => {
    const cases: [string, string, string][] = [
      // Connections that open with /v2 meet a front-door worker: a GET is relayed to the head, another method hands the connection back.
      ['GET', '/v2/models/mlp/infer', 'POST'],
      ['PUT', '/v2/models/mlp/infer', 'POST'],
      ['HEAD', '/v2/models/mlp/versions/1/infer', 'POST'],
      ['DELETE', '/v2/health/live', 'GET, HEAD'],
      ['POST', '/v2/models/mlp', 'GET, HEAD'],
      ['GET', '/v2/repository/index', 'POST'],
      ['GET', '/v2/repository/models/mlp/load', 'POST'],
      ['OPTIONS', '/v2', 'GET, HEAD'],
      // And the head's own.
      ['PATCH', '/api/v1/deployments/mlp', 'GET, HEAD, PUT, DELETE'],
      ['POST', '/metrics', 'GET, HEAD'],
      ['GET', '/status/login', 'POST'],
      ['DELETE', '/docs', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const answer = await nodeCall(cluster.url, method, path);
      assert.equal(answer.status, 405, `${method} ${path}`);
      assert.equal(answer.headers.allow, allow, `${method} ${path}`);
      if (method !== 'HEAD')
        assertError(answer, 405, 'TROUPE_ERR_METHOD_NOT_ALLOWED', new RegExp(`^${method} is not allowed on ${path}: it takes ${allow}$`));
    }
    assertError(await nodeCall(cluster.url, 'GET', '/v3/nothing'), 404, 'TROUPE_ERR_NOT_FOUND', /no endpoint GET \/v3\/nothing/);

    // On a kept-alive connection a worker is serving: an inference, then a wrong method, then an inference again.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const x = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.5) }] });
      assert.equal((await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: x, headers: JSON_TYPE, agent })).status, 200);
      const wrong = await nodeCall(cluster.url, 'GET', '/v2/models/mlp/infer', { agent });
      assertError(wrong, 405, 'TROUPE_ERR_METHOD_NOT_ALLOWED', /it takes POST/);
      assert.equal(wrong.headers.allow, 'POST');
      assert.equal((await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: x, headers: JSON_TYPE, agent })).status, 200);
    } finally {
      agent.destroy();
    }
  });

  test("fastify's own errors: body too large, bad JSON, an unknown content type, a 5,000-character name, a broken %-escape", async () => {
    const big = Buffer.alloc(2 * 2 ** 20, 0x20);
    // On a raw socket: the head answers 413 from the Content-Length and closes, and a client still
    // writing the body may meet EPIPE before it reads the answer (node:http then drops the answer).
    const [tooLarge] = await rawExchange(
      cluster.url,
      Buffer.concat([
        Buffer.from(
          `POST /api/v1/deployments/mlp/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`,
        ),
        big,
      ]),
    );
    assertError(tooLarge!, 413, 'TROUPE_ERR_BODY_TOO_LARGE', /larger than this head accepts \(1 MiB/);
    assertError(
      await nodeCall(cluster.url, 'POST', '/status/login', { body: '{"token": ', headers: JSON_TYPE }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /not valid JSON/,
    );
    assertError(
      await nodeCall(cluster.url, 'POST', '/status/login', { body: '<token/>', headers: { 'content-type': 'application/xml' } }),
      415,
      'TROUPE_ERR_BAD_REQUEST',
      /Unsupported Media Type/,
    );
    const long = 'm'.repeat(5000);
    for (const path of [`/api/v1/deployments/${long}`, `/v2/models/${long}`, `/v2/models/${long}/config`]) {
      const answer = await nodeCall(cluster.url, 'GET', path);
      assertError(answer, 414, 'TROUPE_ERR_BAD_REQUEST', /^a segment of the path is longer than this server reads/);
      assert.ok(answer.body.length < 300, 'the answer does not repeat the path');
    }
    // An inference on a worker: a name that long is no model, and the message does not repeat it whole.
    const infer = await nodeCall(cluster.url, 'POST', `/v2/models/${long}/infer`, { body: '{}', headers: JSON_TYPE });
    assertError(infer, 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /^unknown model 'm{100}'$/);
    assertError(await nodeCall(cluster.url, 'GET', '/api/v1/deployments/%E0%A4%A'), 400, 'TROUPE_ERR_BAD_REQUEST', /%-escape/);
  });

  test("Node's parser errors: a body longer than its Content-Length, a malformed request line, a head too large", async () => {
    // The head's own connections (not /v2): the bytes past the body are parsed as a request, and refused.
    const head = await rawExchange(
      cluster.url,
      'POST /status/logout HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}{"more": "bytes"}\r\n\r\n',
    );
    assertRawError(head.at(-1), 400, /^malformed HTTP request: Parse Error/);
    assertRawError((await rawExchange(cluster.url, 'GET /healthz HTTP/1.1\r\nbad header\r\n\r\n'))[0], 400, /malformed HTTP request/);
    const huge = `GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`;
    assertRawError((await rawExchange(cluster.url, huge))[0], 431, /request head/);

    // A worker's connections: its own parser answers in the same shape.
    const x = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.5) }] });
    const worker = await rawExchange(
      cluster.url,
      `POST /v2/models/mlp/infer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${x.length}\r\n\r\n${x}garbage\r\n\r\n`,
    );
    assert.equal(worker[0]?.status, 200, 'the request before the garbage is answered');
    assertRawError(worker[1], 400, /^malformed HTTP request/);
    const workerHuge = `GET /v2/health/live HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`;
    assertRawError((await rawExchange(cluster.url, workerHuge))[0], 431, /request head/);
  });
});
