import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, rawCall } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const BINARY = { 'content-type': 'application/octet-stream' };
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

interface ModelRecord {
  name: string;
  sha256: string;
  bytes: number;
  inputs: { name: string; dtype: string; shape: (number | string)[] }[];
  outputs: { name: string; dtype: string; shape: (number | string)[] }[];
}

describe('HTTP: model uploads, fetched by agents and cached by hash', { timeout: 150_000 }, () => {
  let cluster: TestCluster;
  let dataDir: string;
  let cnn: Buffer;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'troupe-head-data-'));
    cluster = await startCluster({ headArgs: ['--data-dir', dataDir, '--max-model-mib', '1'], agents: [['--cpus', '16']] });
    cnn = await readFile(cluster.models.cnn);
  });
  after(async () => {
    await cluster?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test('an upload is streamed to disk, checked as ONNX, stored by sha256 and listed', async () => {
    const created = await call(cluster.url, 'PUT', '/api/v1/models/cnn-up', { body: cnn, headers: BINARY });
    assert.equal(created.status, 201, created.body.toString());
    const record = created.json as ModelRecord;
    assert.equal(record.name, 'cnn-up');
    assert.equal(record.sha256, sha256(cnn));
    assert.equal(record.bytes, cnn.length);
    assert.deepEqual(record.inputs, [{ name: 'image', dtype: 'float32', shape: ['N', 3, 32, 32] }]);
    assert.deepEqual(record.outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }]);
    assert.deepEqual(await readFile(join(dataDir, 'models', 'blobs', `${record.sha256}.onnx`)), cnn);

    const again = await call(cluster.url, 'PUT', '/api/v1/models/cnn-up', { body: cnn, headers: BINARY });
    assert.equal(again.status, 200, 'the same name again replaces it');
    const list = (await call(cluster.url, 'GET', '/api/v1/models')).json as { models: ModelRecord[] };
    assert.deepEqual(
      list.models.map((m) => [m.name, m.sha256]),
      [['cnn-up', record.sha256]],
    );
    assert.equal(((await call(cluster.url, 'GET', '/api/v1/models/cnn-up')).json as ModelRecord).sha256, record.sha256);
    const blob = await call(cluster.url, 'GET', `/api/v1/blobs/${record.sha256}`);
    assert.equal(blob.status, 200);
    assert.deepEqual(blob.body, cnn);
  });

  test("deploying it by name: the agent fetches it by hash into its cache, and it serves the SDK's numbers", async () => {
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/cnn-up', {
      body: JSON.stringify({ model: 'cnn-up', threads: 1 }),
      headers: JSON_HEADERS,
    });
    assert.equal(put.status, 201, put.body.toString());
    const view = put.json as DeploymentView;
    assert.equal(view.state, 'READY');
    assert.equal(view.model, `head:cnn-up@sha256:${sha256(cnn)}`, 'deployed by hash');
    assert.deepEqual(await readFile(join(cluster.modelDir, '.troupe-cache', `${sha256(cnn)}.onnx`)), cnn);

    const image = seededFloats(2 * 3 * 32 * 32, 3);
    const client: Cluster = await connect(cluster.url);
    try {
      const sdk = await client.run('cnn-up', { image: tensor('float32', [2, 3, 32, 32], image) });
      const answer = await call(cluster.url, 'POST', '/v2/models/cnn-up/infer', {
        body: JSON.stringify({ inputs: [{ name: 'image', shape: [2, 3, 32, 32], datatype: 'FP32', data: Array.from(image) }] }),
        headers: JSON_HEADERS,
      });
      assert.equal(answer.status, 200, answer.body.toString());
      const out = (answer.json as { outputs: { shape: number[]; data: number[] }[] }).outputs[0]!;
      assert.deepEqual(out.shape, [2, 10]);
      assert.deepEqual([...Float32Array.from(out.data)], [...(sdk.logits!.data as Float32Array)]);
    } finally {
      await client.close();
    }
  });

  test('bytes that do not match the hash are refused by the agent', async () => {
    const mlp = await readFile(cluster.models.mlp);
    const record = (await call(cluster.url, 'PUT', '/api/v1/models/mlp-up', { body: mlp, headers: BINARY })).json as ModelRecord;
    // Tamper with the stored blob behind the head's back: the agent must notice.
    await writeFile(join(dataDir, 'models', 'blobs', `${record.sha256}.onnx`), cnn);
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/tampered', {
      body: JSON.stringify({ model: 'mlp-up' }),
      headers: JSON_HEADERS,
    });
    assertError(put, 502, 'TROUPE_ERR_MODEL_FETCH', new RegExp(`uploaded model 'mlp-up' .* arrived with sha256 ${sha256(cnn)}`));
    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/tampered')).status, 200);
  });

  test('refused uploads and lookups get 4xx and a JSON error naming the problem; the head keeps serving', async () => {
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/junk', { body: 'this is not an onnx model', headers: BINARY }),
      422,
      'TROUPE_ERR_BAD_MODEL_FILE',
      /model 'junk' is not an ONNX model/,
    );
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/empty', { body: '', headers: BINARY }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /the body is empty/,
    );
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/..%2Fx', { body: cnn, headers: BINARY }),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /model name '..\/x' is not allowed: it could escape the model store/,
    );
    assertError(
      await rawCall(cluster.url, 'PUT', '/api/v1/models/..', cnn),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /model name '..' is not allowed/,
    );
    assertError(await call(cluster.url, 'GET', '/api/v1/models/..%2F..%2Fetc%2Fpasswd'), 400, 'TROUPE_ERR_MODEL_PATH', /could escape/);
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/big', { body: Buffer.alloc(2 * 2 ** 20), headers: BINARY }),
      413,
      'TROUPE_ERR_BODY_TOO_LARGE',
      /model 'big' is \d+ bytes; this head accepts up to 1048576/,
    );
    assertError(await call(cluster.url, 'GET', '/api/v1/models/nope'), 404, 'TROUPE_ERR_UNKNOWN_MODEL', /no uploaded model named 'nope'/);
    assertError(await call(cluster.url, 'GET', '/api/v1/blobs/..%2Fmodels.json'), 400, 'TROUPE_ERR_BAD_REQUEST', /is not a sha256/);
    assertError(
      await call(cluster.url, 'GET', `/api/v1/blobs/${'0'.repeat(64)}`),
      404,
      'TROUPE_ERR_UNKNOWN_MODEL',
      /no uploaded model has sha256 0{64}/,
    );
    const ghost = JSON.stringify({ model: `head:ghost@sha256:${'0'.repeat(64)}` });
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/deployments/ghost', { body: ghost, headers: JSON_HEADERS }),
      404,
      'TROUPE_ERR_UNKNOWN_MODEL',
      /no uploaded model has sha256/,
    );

    const list = (await call(cluster.url, 'GET', '/api/v1/models')).json as { models: ModelRecord[] };
    assert.deepEqual(
      list.models.map((m) => m.name),
      ['cnn-up', 'mlp-up'],
      'nothing refused was stored',
    );
    assert.equal((await call(cluster.url, 'GET', '/v2/models/cnn-up/ready')).status, 200);
  });
});
