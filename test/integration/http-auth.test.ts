import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call } from '../helpers/http.js';
import { rejectsWith } from '../helpers/graphs.js';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';

const TOKEN = 'http-test-token-8f3a';
const JSON_HEADERS = { 'content-type': 'application/json' };
const bearer = (token: string) => ({ ...JSON_HEADERS, authorization: `Bearer ${token}` });

describe('HTTP: the cluster token', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let dataDir: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'troupe-head-data-'));
    cluster = await startCluster({ headArgs: ['--token', TOKEN, '--data-dir', dataDir], agents: [['--token', TOKEN]] });
  });
  after(async () => {
    await cluster?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test('every mutating endpoint needs the token: missing or wrong gets 401 and a JSON error', async () => {
    const body = JSON.stringify({ model: 'mlp.onnx', threads: 1 });
    const missing = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', { body, headers: JSON_HEADERS });
    assertError(
      missing,
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /missing cluster token: PUT \/api\/v1\/deployments\/:name needs 'Authorization: Bearer <token>'/,
    );
    assert.equal(missing.headers.get('www-authenticate'), 'Bearer');
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', { body, headers: bearer('not-the-token') }),
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /wrong cluster token/,
    );
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', { body, headers: { ...JSON_HEADERS, authorization: TOKEN } }),
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /wrong cluster token/,
    );
    assertError(await call(cluster.url, 'DELETE', '/api/v1/deployments/mlp'), 401, 'TROUPE_ERR_UNAUTHORIZED', /missing cluster token/);
    const onnx = await readFile(cluster.models.cnn);
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/cnn', { body: onnx, headers: { 'content-type': 'application/octet-stream' } }),
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /missing cluster token/,
    );
    assertError(await call(cluster.url, 'GET', `/api/v1/blobs/${'0'.repeat(64)}`), 401, 'TROUPE_ERR_UNAUTHORIZED', /missing cluster token/);
    assertError(await call(cluster.url, 'DELETE', '/api/v1/models/cnn'), 401, 'TROUPE_ERR_UNAUTHORIZED', /missing cluster token/);
    assert.equal(
      ((await call(cluster.url, 'GET', '/api/v1/deployments')).json as { deployments: unknown[] }).deployments.length,
      0,
      'nothing was deployed',
    );

    const ok = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', { body, headers: bearer(TOKEN) });
    assert.equal(ok.status, 201, ok.body.toString());
  });

  test('reads are open, and so is inference on a head that listens only on loopback', async () => {
    for (const path of [
      '/v2',
      '/v2/health/ready',
      '/v2/models/mlp',
      '/api/v1/cluster',
      '/api/v1/deployments/mlp',
      '/api/v1/models',
      '/docs',
    ]) {
      assert.equal((await call(cluster.url, 'GET', path)).status, 200, path);
    }
    const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.5) }] }),
      headers: JSON_HEADERS,
    });
    assert.equal(answer.status, 200, answer.body.toString());
  });

  test('the SDK on loopback without the token runs inference, as HTTP does; changes and method calls need it', async () => {
    const anon = await connect(cluster.url);
    try {
      const future = anon.run('mlp', { x: tensor('float32', [1, 64], new Float32Array(64).fill(0.5)) });
      assert.deepEqual((await future).logits?.shape, [1, 10]);
      assert.ok((await anon.describe()).deployments.some((d) => d.name === 'mlp'));
      const needsToken =
        /needs the cluster token: this client connected without one, which a head on loopback allows for inference, jobs and futures only; connect\(url, \{ token \}\) or set TROUPE_TOKEN/;
      await rejectsWith(anon.deploy({ name: 'anon', model: 'mlp.onnx', threads: 1 }), 'TROUPE_ERR_UNAUTHORIZED', needsToken);
      await rejectsWith(anon.undeploy('mlp'), 'TROUPE_ERR_UNAUTHORIZED', needsToken);
      await rejectsWith(
        anon.actorHandle('mlp').call('run'),
        'TROUPE_ERR_UNAUTHORIZED',
        /calling a class actor's methods needs the cluster token/,
      );
      // The connection is still up, and mlp still deployed.
      assert.deepEqual((await anon.run('mlp', { x: tensor('float32', [1, 64], new Float32Array(64)) })).logits?.shape, [1, 10]);
    } finally {
      await anon.close();
    }
    // A wrong token is a mistake to say at once, not a silent downgrade.
    await assert.rejects(connect(cluster.url, { token: 'not-the-token-at-all' }), (err: unknown) => {
      assert.ok(err instanceof TroupeError && err.code === 'TROUPE_ERR_UNAUTHORIZED', String(err));
      return true;
    });
  });

  test('an uploaded model reaches the agent, which fetches it with the token', async () => {
    const onnx = await readFile(cluster.models.cnn);
    const upload = await call(cluster.url, 'PUT', '/api/v1/models/cnn', {
      body: onnx,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/octet-stream' },
    });
    assert.equal(upload.status, 201, upload.body.toString());
    const deployed = await call(cluster.url, 'PUT', '/api/v1/deployments/cnn', {
      body: JSON.stringify({ model: 'cnn', threads: 1, cpus: 0.5 }),
      headers: bearer(TOKEN),
    });
    assert.equal(deployed.status, 201, deployed.body.toString());
    assert.equal((deployed.json as { state: string }).state, 'READY');
    const removed = await call(cluster.url, 'DELETE', '/api/v1/deployments/cnn', { headers: bearer(TOKEN) });
    assert.equal(removed.status, 200);
  });
});
