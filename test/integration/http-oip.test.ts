import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, binaryBody, call, splitBinaryAnswer } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

function floatsOf(bytes: Uint8Array): number[] {
  // Copy first: a slice of the response body need not be 4-byte aligned.
  return [...new Float32Array(new Uint8Array(bytes).buffer)];
}

describe('HTTP: Open Inference Protocol v2', { timeout: 150_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let actorPid: number;
  const rows = 3;
  const x = seededFloats(rows * 64, 7);
  let sdkLogits: number[];

  const infer = (body: unknown, path = '/v2/models/mlp/infer') =>
    call(cluster.url, 'POST', path, { body: JSON.stringify(body), headers: JSON_HEADERS });
  const jsonInput = (data: unknown, shape = [rows, 64]) => ({ name: 'x', shape, datatype: 'FP32', data });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--max-body-mib', '1'] });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: JSON_HEADERS,
    });
    assert.equal(put.status, 201, put.body.toString());
    actorPid = (put.json as { actors: { pid: number }[] }).actors[0]!.pid;
    client = await connect(cluster.url);
    const out = await client.run('mlp', { x: tensor('float32', [rows, 64], x) });
    sdkLogits = [...(out.logits!.data as Float32Array)];
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('health, server metadata and model metadata, as the protocol words them', async () => {
    // The server's health also in the JSON body KServe's server sends and its REST client reads
    // (`response.json().get("live")`); Triton's clients read the status alone.
    const live = await call(cluster.url, 'GET', '/v2/health/live');
    assert.equal(live.status, 200);
    assert.deepEqual(live.json, { live: true });
    const ready = await call(cluster.url, 'GET', '/v2/health/ready');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.json, { status: 'ready', ready: true, nodes: 1 });
    for (const path of ['/v2/models/mlp/ready', '/v2/models/mlp/versions/1/ready']) {
      const answer = await call(cluster.url, 'GET', path);
      assert.equal(answer.status, 200, path);
      assert.equal(answer.body.length, 0, `${path}: a model's ready has no body`);
    }
    assert.equal((await call(cluster.url, 'GET', '/v2/models/nope/ready')).status, 404);

    const server = await call(cluster.url, 'GET', '/v2');
    assert.equal(server.status, 200);
    const meta = server.json as { name: string; version: string; extensions: string[] };
    assert.equal(meta.name, 'troupe');
    assert.match(meta.version, /^\d+\.\d+\.\d+/);
    assert.ok(meta.extensions.includes('binary_tensor_data'));

    const model = await call(cluster.url, 'GET', '/v2/models/mlp');
    assert.equal(model.status, 200);
    assert.deepEqual(model.json, {
      name: 'mlp',
      versions: ['1'],
      platform: 'onnx_onnxv1',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }],
      outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 10] }],
    });
    assert.deepEqual((await call(cluster.url, 'GET', '/v2/models/mlp/versions/1')).json, model.json);
    assertError(
      await call(cluster.url, 'GET', '/v2/models/mlp/versions/2'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /model 'mlp' has no version '2'/,
    );
    assertError(await call(cluster.url, 'GET', '/v2/models/nope'), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /^unknown model 'nope'$/);
  });

  test("JSON inference gives the SDK's numbers, flat or nested, and echoes the id", async () => {
    const flat = await infer({ id: 'req-1', inputs: [jsonInput(Array.from(x))] });
    assert.equal(flat.status, 200, flat.body.toString());
    assert.match(flat.headers.get('content-type') ?? '', /^application\/json/);
    const body = flat.json as {
      model_name: string;
      id: string;
      outputs: { name: string; datatype: string; shape: number[]; data: number[] }[];
    };
    assert.equal(body.model_name, 'mlp');
    assert.equal(body.id, 'req-1');
    assert.equal(body.outputs.length, 1);
    const [out] = body.outputs;
    assert.deepEqual([out!.name, out!.datatype, out!.shape], ['logits', 'FP32', [rows, 10]]);
    assert.deepEqual([...Float32Array.from(out!.data)], sdkLogits);

    const nested = Array.from({ length: rows }, (_, r) => Array.from(x.subarray(r * 64, (r + 1) * 64)));
    const fromNested = await infer({ inputs: [jsonInput(nested)], outputs: [{ name: 'logits' }] });
    assert.equal(fromNested.status, 200);
    const nestedBody = fromNested.json as { id?: string; outputs: { data: number[] }[] };
    assert.equal('id' in nestedBody, false, 'no id asked, none returned');
    assert.deepEqual([...Float32Array.from(nestedBody.outputs[0]!.data)], sdkLogits);
  });

  test('inference under every URL the protocol names, with a query string too; an unknown model or version is a 404', async () => {
    const body = { inputs: [jsonInput(Array.from(x))] };
    for (const path of ['/v2/models/mlp/versions/1/infer', '/v2/models/mlp/infer?trace=0']) {
      const answer = await infer(body, path);
      assert.equal(answer.status, 200, `${path}: ${answer.body.toString()}`);
      assert.equal(answer.headers.get('content-length'), String(answer.body.length));
      assert.deepEqual([...Float32Array.from((answer.json as { outputs: { data: number[] }[] }).outputs[0]!.data)], sdkLogits, path);
    }
    assertError(
      await infer(body, '/v2/models/mlp/versions/2/infer'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /model 'mlp' has no version '2'/,
    );
    assertError(await infer(body, '/v2/models/nope/infer'), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /^unknown model 'nope'$/);
    assertError(await infer(body, '/v2/models/m%2Fl%2Fp/infer'), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /unknown model 'm\/l\/p'/);
  });

  test('a body streamed without a length is cut off at the limit with a 413, and the head keeps serving', async () => {
    const url = new URL(cluster.url);
    const answer = await new Promise<{ status: number; json: unknown }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/v2/models/mlp/infer',
          timeout: 30_000,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }),
          );
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
      // The head closes the connection after its answer: writes still under way then may fail.
      req.on('error', (err) => (req.writableEnded ? undefined : reject(err)));
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      for (let i = 0; i < 40; i++) req.write(chunk);
      req.end();
    });
    assertError(answer, 413, 'TROUPE_ERR_BODY_TOO_LARGE', /larger than this head accepts \(1 MiB/);
    assert.equal((await infer({ inputs: [jsonInput(Array.from(x))] })).status, 200);
  });

  test("binary tensor data gives the SDK's numbers: binary in and out, binary in JSON out, JSON in binary out", async () => {
    const xBytes = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    const binaryInput = { name: 'x', shape: [rows, 64], datatype: 'FP32', parameters: { binary_data_size: xBytes.length } };

    const both = binaryBody({ id: 'b1', inputs: [binaryInput], parameters: { binary_data_output: true } }, [xBytes]);
    const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', { body: both.body, headers: both.headers });
    assert.equal(answer.status, 200, answer.body.toString());
    assert.equal(answer.headers.get('content-type'), 'application/octet-stream');
    const { json, binary } = splitBinaryAnswer(answer);
    assert.equal(json.id, 'b1');
    assert.deepEqual(json.outputs, [
      { name: 'logits', datatype: 'FP32', shape: [rows, 10], parameters: { binary_data_size: rows * 10 * 4 } },
    ]);
    assert.equal(binary.length, rows * 10 * 4);
    assert.deepEqual(floatsOf(binary), sdkLogits);

    const jsonOut = binaryBody({ inputs: [binaryInput] }, [xBytes]);
    const answer2 = await call(cluster.url, 'POST', '/v2/models/mlp/infer', { body: jsonOut.body, headers: jsonOut.headers });
    assert.equal(answer2.status, 200);
    assert.match(answer2.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(answer2.headers.get('inference-header-content-length'), null);
    assert.deepEqual([...Float32Array.from((answer2.json as { outputs: { data: number[] }[] }).outputs[0]!.data)], sdkLogits);

    const binaryOut = await infer({ inputs: [jsonInput(Array.from(x))], outputs: [{ name: 'logits', parameters: { binary_data: true } }] });
    assert.equal(binaryOut.status, 200);
    assert.deepEqual(floatsOf(splitBinaryAnswer(binaryOut).binary), sdkLogits);
  });

  test("large binary bodies, read into reused buffers, 16 at a time with bad ones among them: each answer is its own request's", async () => {
    // 320 rows of 64 floats: 80 KB bodies, more than one 64 KB read each, which the head joins into
    // buffers from its pool and gives back after each answer; a buffer handed out twice would mix
    // requests' numbers here.
    const big = 320;
    const inputs = Array.from({ length: 48 }, (_, i) => seededFloats(big * 64, 100 + i));
    const expected = await Promise.all(
      inputs.map(async (v) => [...((await client.run('mlp', { x: tensor('float32', [big, 64], v) })).logits!.data as Float32Array)]),
    );
    const answers: number[][] = [];
    for (let wave = 0; wave < inputs.length; wave += 16) {
      const batch = inputs.slice(wave, wave + 16).map(async (v, k) => {
        const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
        // Every fourth request declares a shape its bytes do not fill: a 400, its buffer not reused.
        const shape = k % 4 === 3 ? [big + 1, 64] : [big, 64];
        const { body, headers } = binaryBody(
          {
            inputs: [{ name: 'x', shape, datatype: 'FP32', parameters: { binary_data_size: bytes.length } }],
            parameters: { binary_data_output: true },
          },
          [bytes],
        );
        const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', { body, headers });
        if (k % 4 === 3) {
          assertError(answer, 400, 'TROUPE_ERR_BAD_TENSOR', /input 'x': float32\[321,64\] needs 82176 bytes, got 81920/);
          return;
        }
        assert.equal(answer.status, 200, answer.body.toString());
        answers[wave + k] = floatsOf(splitBinaryAnswer(answer).binary);
      });
      await Promise.all(batch);
    }
    for (let i = 0; i < inputs.length; i++) if (i % 4 !== 3) assert.deepEqual(answers[i], expected[i], `request ${i}`);
  });

  test('outputs are honoured: a known one is returned, an unknown one is a 400 naming it', async () => {
    const ok = await infer({ inputs: [jsonInput(Array.from(x))], outputs: [{ name: 'logits' }] });
    assert.deepEqual(
      (ok.json as { outputs: { name: string }[] }).outputs.map((o) => o.name),
      ['logits'],
    );
    assertError(
      await infer({ inputs: [jsonInput(Array.from(x))], outputs: [{ name: 'probs' }] }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /unknown output 'probs': model 'mlp' has 'logits'/,
    );
  });

  test('bad requests each get the right status and a JSON error naming the problem; the head keeps serving', async () => {
    const post = (body: string | Buffer, headers: Record<string, string> = JSON_HEADERS, path = '/v2/models/mlp/infer') =>
      call(cluster.url, 'POST', path, { body, headers });
    const one = Array.from(x.subarray(0, 64));

    assertError(await post('{"inputs": [{"name": "x",'), 400, 'TROUPE_ERR_BAD_REQUEST', /the inference request is not valid JSON/);
    assertError(await post('{"id": "no inputs"}'), 400, 'TROUPE_ERR_BAD_REQUEST', /invalid at 'inputs'/);
    assertError(
      await infer({ inputs: [{ ...jsonInput(one, [1, 64]), datatype: 'FLOAT32' }] }),
      400,
      'TROUPE_ERR_BAD_TENSOR',
      /input 'x': unknown datatype 'FLOAT32' \(use one of .*FP32/,
    );
    assertError(
      await infer({ inputs: [{ ...jsonInput(one, [1, 64]), datatype: 'FP64' }] }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /input 'x': expected float32\[N,64\], got float64\[1,64\]/,
    );
    assertError(
      await infer({ inputs: [jsonInput(one.slice(1), [1, 64])] }),
      400,
      'TROUPE_ERR_BAD_TENSOR',
      /input 'x': shape \[1,64\] holds 64 elements, "data" has 63/,
    );
    assertError(
      await infer({ inputs: [jsonInput([...one.slice(1), 'one'], [1, 64])] }),
      400,
      'TROUPE_ERR_BAD_TENSOR',
      /data\[63\] is "one", expected a number for datatype FP32/,
    );
    assertError(
      await infer({ inputs: [{ ...jsonInput(one, [1, 64]), name: 'y' }] }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /unknown input 'y': model 'mlp' takes 'x'/,
    );

    const short = binaryBody({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', parameters: { binary_data_size: 252 } }] }, [
      new Uint8Array(252),
    ]);
    assertError(await post(short.body, short.headers), 400, 'TROUPE_ERR_BAD_TENSOR', /input 'x': float32\[1,64\] needs 256 bytes, got 252/);
    const beyond = binaryBody({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', parameters: { binary_data_size: 256 } }] }, [
      new Uint8Array(256),
    ]);
    assertError(
      await post(beyond.body, { ...beyond.headers, 'inference-header-content-length': String(beyond.body.length + 1) }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /Inference-Header-Content-Length is \d+ but the body has only \d+ bytes/,
    );
    const missing = binaryBody({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', parameters: { binary_data_size: 256 } }] }, [
      new Uint8Array(100),
    ]);
    assertError(
      await post(missing.body, missing.headers),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /binary_data_size is 256 but only 100 bytes of binary data are left/,
    );

    const oversized = await post(Buffer.alloc(2 * 2 ** 20, 0x20), { 'content-type': 'application/json' });
    assertError(oversized, 413, 'TROUPE_ERR_BODY_TOO_LARGE', /larger than this head accepts \(1 MiB; see --max-body-mib\)/);

    assertError(
      await infer({ inputs: [jsonInput(one, [1, 64])] }, '/v2/models/nope/infer'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /unknown model 'nope'/,
    );
    const wrongMethod = await call(cluster.url, 'GET', '/v2/models/mlp/infer');
    assertError(wrongMethod, 405, 'TROUPE_ERR_METHOD_NOT_ALLOWED', /GET is not allowed on \/v2\/models\/mlp\/infer: it takes POST/);
    assert.equal(wrongMethod.headers.get('allow'), 'POST');
    const late = await infer({ parameters: { timeout: 1 }, inputs: [jsonInput(one, [1, 64])] });
    assertError(late, 504, 'TROUPE_ERR_DEADLINE_EXCEEDED', /deadline/);

    const ok = await infer({ id: 'after', inputs: [jsonInput(Array.from(x))] });
    assert.equal(ok.status, 200);
    assert.deepEqual([...Float32Array.from((ok.json as { outputs: { data: number[] }[] }).outputs[0]!.data)], sdkLogits);
    assert.ok(isAlive(actorPid), 'the same actor process still serves');
    const view = await client.describe();
    assert.equal(view.deployments.find((d) => d.name === 'mlp')!.actors[0]!.pid, actorPid);
  });

  test('a model with no READY replica: metadata and inference are 503 with Retry-After, its readiness is false', async () => {
    // One GPU on a node with none: it stays PENDING with a reason, for as long as the test needs.
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/gpu-mlp?wait=false', {
      body: JSON.stringify({ model: 'mlp.onnx', gpus: 1 }),
      headers: JSON_HEADERS,
    });
    assert.equal(put.status, 202, put.body.toString());
    try {
      assert.equal((await call(cluster.url, 'GET', '/v2/models/gpu-mlp/ready')).status, 400);
      assert.equal((await call(cluster.url, 'GET', '/v2/health/ready')).status, 200, 'the server is ready; only that model is not');
      const meta = await call(cluster.url, 'GET', '/v2/models/gpu-mlp');
      assertError(meta, 503, 'TROUPE_ERR_NOT_READY', /no READY replica/);
      assert.equal(meta.headers.get('retry-after'), '1');
      const answer = await infer({ inputs: [jsonInput(Array.from(x))] }, '/v2/models/gpu-mlp/infer');
      assertError(answer, 503, 'TROUPE_ERR_NOT_READY', /gpu-mlp/);
      assert.equal(answer.headers.get('retry-after'), '1');
    } finally {
      assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/gpu-mlp')).status, 200);
    }
    assert.equal((await call(cluster.url, 'GET', '/v2/health/ready')).status, 200);
  });
});
