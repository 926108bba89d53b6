import { authError, needsToken } from '../../runtime/internal.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Fastify from 'fastify';
import { parseDocument } from '../../head/http/body.js';
import { errorHandler } from '../../head/http/errors.js';
import { checkModelName } from '../../head/http/model-store.js';
import { inspectOnnx } from '../../runtime/onnx-inspect.js';
import { buildMlp } from '../../models/index.js';
import { TroupeError, createLogger } from '../../runtime/internal.js';
import type { ErrorCode } from '../../runtime/internal.js';
import { blobUrl, formatModelRef, parseModelRef } from '../../runtime/model-ref.js';

function throwsCode(fn: () => unknown, code: ErrorCode, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof TroupeError, String(err));
    assert.equal(err.code, code, err.message);
    assert.match(err.message, message);
    return true;
  });
}

describe('HTTP API helpers', () => {
  test('who needs the token: writes always, inference only beyond loopback, reads never', () => {
    assert.equal(needsToken('write', undefined, '0.0.0.0'), false, 'no token configured');
    assert.equal(needsToken('write', 'secret-token', '127.0.0.1'), true);
    assert.equal(needsToken('inference', 'secret-token', '127.0.0.1'), false);
    assert.equal(needsToken('inference', 'secret-token', '::1'), false);
    assert.equal(needsToken('inference', 'secret-token', '0.0.0.0'), true);
    assert.equal(needsToken('inference', 'secret-token', '10.1.2.3'), true);
    assert.equal(needsToken('read', 'secret-token', '0.0.0.0'), false);
  });

  test('the 401 a request without the right token gets names what is missing and the route', () => {
    const request = (authorization?: string) => ({ method: 'POST', headers: authorization === undefined ? {} : { authorization } });
    const route = '/v2/models/:name/infer';
    assert.equal(authError('inference', 'secret-token', '127.0.0.1', request(), route), undefined, 'inference on loopback is open');
    assert.equal(authError('inference', 'secret-token', '0.0.0.0', request('Bearer secret-token'), route), undefined);
    assert.deepEqual(authError('inference', 'secret-token', '0.0.0.0', request(), route), {
      status: 401,
      code: 'TROUPE_ERR_UNAUTHORIZED',
      message: "missing cluster token: POST /v2/models/:name/infer needs 'Authorization: Bearer <token>'",
    });
    assert.match(authError('inference', 'secret-token', '10.0.0.1', request('Bearer nope'), route)!.message, /^wrong cluster token: POST/);
    assert.match(
      authError('write', 'secret-token', '127.0.0.1', request('secret-token'), '/api/v1/deployments/:name')!.message,
      /^wrong cluster token: POST \/api\/v1\/deployments\/:name/,
    );
  });

  test('model names cannot escape the store', () => {
    assert.equal(checkModelName('resnet-50.v2'), 'resnet-50.v2');
    for (const name of ['../x', '..', 'a/b', '.hidden', 'a\\b'])
      throwsCode(() => checkModelName(name), 'TROUPE_ERR_MODEL_PATH', /could escape the model store/);
    throwsCode(() => checkModelName('sp ace'), 'TROUPE_ERR_BAD_REQUEST', /names are 1-63 letters/);
  });

  test('model references carry the hash; anything else is a path', () => {
    const sha256 = 'a'.repeat(64);
    const ref = formatModelRef({ name: 'mlp', sha256 });
    assert.equal(ref, `head:mlp@sha256:${sha256}`);
    assert.deepEqual(parseModelRef(ref), { name: 'mlp', sha256 });
    assert.equal(parseModelRef('mlp.onnx'), undefined);
    assert.equal(parseModelRef(`head:../x@sha256:${sha256}`), undefined);
    assert.equal(blobUrl('ws://127.0.0.1:8470', sha256).href, `http://127.0.0.1:8470/api/v1/blobs/${sha256}`);
    assert.equal(blobUrl('wss://head.example:443/x', sha256).protocol, 'https:');
  });

  test('bodies: JSON, YAML, and broken JSON named as JSON', () => {
    assert.deepEqual(parseDocument(Buffer.from('{"model":"a"}'), 'application/x-www-form-urlencoded'), { model: 'a' });
    assert.deepEqual(parseDocument(Buffer.from('model: a\nreplicas: 2\n'), 'application/yaml'), { model: 'a', replicas: 2 });
    assert.deepEqual(parseDocument(Buffer.from('model: a\n'), undefined), { model: 'a' });
    throwsCode(() => parseDocument(Buffer.from('{"model": '), 'application/json'), 'TROUPE_ERR_BAD_REQUEST', /the body is not valid JSON/);
    throwsCode(() => parseDocument(Buffer.from('  '), undefined), 'TROUPE_ERR_BAD_REQUEST', /the body is empty/);
    throwsCode(() => parseDocument(Buffer.from('a: [1'), 'text/yaml'), 'TROUPE_ERR_BAD_REQUEST', /not valid YAML/);
  });

  test('uploaded models are checked by parsing them as ONNX (no onnxruntime)', () => {
    const summary = inspectOnnx(buildMlp().bytes, 'model');
    assert.deepEqual(summary.inputs, [{ name: 'x', dtype: 'float32', shape: ['N', 64] }]);
    assert.deepEqual(summary.outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }]);
    assert.equal(summary.opsets[0]?.version, 13);
    throwsCode(
      () => inspectOnnx(Buffer.from('this is not an onnx model'), "model 'junk'"),
      'TROUPE_ERR_BAD_MODEL_FILE',
      /model 'junk' is not an ONNX model/,
    );
    throwsCode(() => inspectOnnx(new Uint8Array(0), "model 'empty'"), 'TROUPE_ERR_BAD_MODEL_FILE', /no ir_version or no graph/);
  });

  test('errors are JSON with the code; retryable 429/503 carry Retry-After; fastify errors are mapped', async () => {
    const app = Fastify({ logger: false, bodyLimit: 10 });
    app.setErrorHandler(errorHandler(createLogger('test'), 10));
    const codes: ErrorCode[] = [
      'TROUPE_ERR_OVERLOADED',
      'TROUPE_ERR_NOT_READY',
      'TROUPE_ERR_DEADLINE_EXCEEDED',
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
    ];
    app.get('/fail/:i', async (request) => {
      const code = codes[Number((request.params as { i: string }).i)]!;
      throw new TroupeError(code, `failed with ${code}`);
    });
    app.post('/echo', async (request) => request.body);
    try {
      const expect: [number, string | undefined][] = [
        [429, '1'],
        [503, '1'],
        [504, undefined],
        [404, undefined],
      ];
      for (const [i, [status, retryAfter]] of expect.entries()) {
        const res = await app.inject({ method: 'GET', url: `/fail/${i}` });
        assert.equal(res.statusCode, status);
        assert.equal(res.headers['retry-after'], retryAfter);
        assert.deepEqual(res.json(), { error: `failed with ${codes[i]}`, code: codes[i] });
      }
      const big = await app.inject({ method: 'POST', url: '/echo', payload: { a: 'x'.repeat(100) } });
      assert.equal(big.statusCode, 413);
      assert.equal(big.json().code, 'TROUPE_ERR_BODY_TOO_LARGE');
    } finally {
      await app.close();
    }
  });
});
