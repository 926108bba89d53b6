import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { GraphBuilder } from '../../models/index.js';
import type { DType } from '../../models/index.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, nodeCall, rawExchange } from '../helpers/http.js';

/**
 * The checks of Triton's qa/L0_http/http_test.py (triton-inference-server/server) that hold for
 * any server of the protocol, request by request as the Python test sends them with `requests`,
 * against models built like Triton's test models (onnx_zero_1_float32 and friends: identities
 * and a sum). Where Troupe answers otherwise on purpose, the test says so and pins Troupe's answer;
 * docs/http-api.md keeps the table of which check is where.
 */

const JSON_TYPE = { 'content-type': 'application/json' };
const RAW = { 'inference-header-content-length': '0' };

/** One identity (or, with several inputs, a Sum) of `dtype` over `dims`, as Triton's onnx_zero_* models. */
function zeroModel(inputs: number, dtype: DType, dims: (number | string)[]): Uint8Array {
  const g = new GraphBuilder('zero');
  const names = Array.from({ length: inputs }, (_, i) => g.input(`INPUT${i}`, dtype, dims));
  g.node(inputs === 1 ? 'Identity' : 'Sum', names, ['OUTPUT0']);
  g.output('OUTPUT0', dtype, dims);
  return g.toBytes();
}

const MODELS: Record<string, Uint8Array> = {
  onnx_zero_1_float32: zeroModel(1, 'float32', ['N', 8]),
  onnx_zero_1_object_1_element: zeroModel(1, 'string', [1]),
  onnx_zero_1_object: zeroModel(1, 'string', [2]),
  onnx_zero_1_float16: zeroModel(1, 'float16', ['N', 'M']),
  onnx_zero_3_float32: zeroModel(3, 'float32', ['N', 8]),
};

const f32 = (n: number) => Buffer.from(Float32Array.from({ length: n }, (_, i) => i).buffer);

describe("HTTP: the generic checks of Triton's qa/L0_http/http_test.py", { timeout: 150_000 }, () => {
  let cluster: TestCluster;
  const infer = (model: string, body: string | Buffer, headers: Record<string, string>) =>
    nodeCall(cluster.url, 'POST', `/v2/models/${model}/infer`, { body, headers });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '1', '--max-body-mib', '1'] });
    for (const [name, bytes] of Object.entries(MODELS)) {
      await writeFile(join(cluster.modelDir, `${name}.onnx`), bytes);
      const put = await nodeCall(cluster.url, 'PUT', `/api/v1/deployments/${name}`, {
        body: JSON.stringify({ model: `${name}.onnx`, threads: 1, cpus: 0.2 }),
        headers: JSON_TYPE,
      });
      assert.equal(put.status, 201, put.body.toString());
    }
  });
  after(async () => {
    await cluster?.stop();
  });

  test('test_raw_binary, test_raw_binary_longer: an identity gives the raw body back after its JSON header', async () => {
    for (const n of [8, 32]) {
      const r = await infer('onnx_zero_1_float32', f32(n), RAW);
      assert.equal(r.status, 200, r.body.toString());
      const header = Number(r.headers['inference-header-content-length']);
      assert.deepEqual(r.body.subarray(header), f32(n), `${n} floats`);
    }
  });

  test('test_byte: a BYTES input of one element takes the whole raw body; the output comes back length-prefixed', async () => {
    const r = await infer('onnx_zero_1_object_1_element', Buffer.from('427'), RAW);
    assert.equal(r.status, 200, r.body.toString());
    const header = Number(r.headers['inference-header-content-length']);
    assert.equal(r.body.subarray(header + 4).toString(), '427');
    assert.equal(r.body.readUInt32LE(header), 3);
  });

  test('test_byte_too_many_elements, test_multi_variable_dimensions, test_multi_inputs: 400 naming why the raw input cannot be deduced', async () => {
    assertError(
      await infer('onnx_zero_1_object', Buffer.from('427'), RAW),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /a raw BYTES body is one element/,
    );
    assertError(
      await infer('onnx_zero_1_float16', Buffer.alloc(8), RAW),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /raw input 'INPUT0': its shape \[-1, -1\] has 2 variable dimensions/,
    );
    assertError(
      await infer('onnx_zero_3_float32', f32(24), RAW),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /must have exactly one input to deduce it, it has 3 \('INPUT0', 'INPUT1', 'INPUT2'\)/,
    );
  });

  test('test_content_encoding_chunked_manually: a raw body in chunked transfer encoding', async () => {
    const input = f32(8);
    const [r] = await rawExchange(
      cluster.url,
      Buffer.concat([
        Buffer.from(
          'POST /v2/models/onnx_zero_1_float32/infer HTTP/1.1\r\nhost: x\r\ninference-header-content-length: 0\r\ntransfer-encoding: chunked\r\n\r\n',
        ),
        Buffer.from(`${input.length.toString(16).toUpperCase()}\r\n`),
        input,
        Buffer.from('\r\n0\r\n\r\n'),
      ]),
    );
    assert.equal(r?.status, 200, r?.body.toString());
    assert.deepEqual(r!.body.subarray(Number(r!.headers['inference-header-content-length'])), input);
  });

  test('test_buffer_size_overflow, test_negative_dimensions: 400 naming the dim (Triton answers 500 for a negative one)', async () => {
    for (const shape of [
      [2 ** 4, 2 ** 60 + 2],
      [2 ** 2, 2 ** 60 + 2],
    ]) {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', shape, datatype: 'FP32', data: [1.0] }] });
      assertError(await infer('onnx_zero_1_float32', body, JSON_TYPE), 400, 'TROUPE_ERR_BAD_TENSOR', /at most 2\^53 - 1/);
    }
    const negative = JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [2, -5], datatype: 'FP32', data: [1.0] }] });
    assertError(await infer('onnx_zero_1_float32', negative, JSON_TYPE), 400, 'TROUPE_ERR_BAD_TENSOR', /shape \[2,-5\] has -5/);
  });

  test('test_loading_large_invalid_model: a load with a config and model files is refused as JSON, past the body limit too', async () => {
    const path = '/v2/repository/models/invalid_onnx/load';
    const small = JSON.stringify({ parameters: { config: JSON.stringify({ backend: 'onnxruntime' }), 'file:1/model.onnx': 'QUFB' } });
    assertError(
      await nodeCall(cluster.url, 'POST', path, { body: small, headers: JSON_TYPE }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /load takes no parameters/,
    );
    const large = JSON.stringify({ parameters: { 'file:1/model.onnx': 'A'.repeat(2 * 2 ** 20) } });
    assertError(await nodeCall(cluster.url, 'POST', path, { body: large, headers: JSON_TYPE }), 413, 'TROUPE_ERR_BODY_TOO_LARGE', /1 MiB/);
  });

  test('test_json_recursion_depth_limit: nested "data" is flattened at any depth (Triton refuses past 100), and nothing breaks', async () => {
    const nested = (depth: number, value: string) => '['.repeat(depth) + value + ']'.repeat(depth);
    for (const depth of [50, 120, 100_000]) {
      const body = `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,8],"data":${nested(depth, '0,1,2,3,4,5,6,7')}}]}`;
      const r = await infer('onnx_zero_1_float32', body, JSON_TYPE);
      assert.equal(r.status, 200, `depth ${depth}: ${r.body.toString().slice(0, 200)}`);
      assert.deepEqual((r.json as { outputs: { data: number[] }[] }).outputs[0]!.data, [0, 1, 2, 3, 4, 5, 6, 7]);
    }
    const bytes = `{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1],"data":${nested(120, '"hello"')}}]}`;
    const r = await infer('onnx_zero_1_object_1_element', bytes, JSON_TYPE);
    assert.deepEqual((r.json as { outputs: { data: string[] }[] }).outputs[0]!.data, ['hello']);
    assert.equal((await nodeCall(cluster.url, 'GET', '/v2/health/live')).status, 200);
  });

  test('test_duplicate_output_names: 400 naming the output; the server stays live', async () => {
    const body = JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 8], data: [[0, 1, 2, 3, 4, 5, 6, 7]] }],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }],
    });
    assertError(await infer('onnx_zero_1_float32', body, JSON_TYPE), 400, 'TROUPE_ERR_BAD_INPUT', /output 'OUTPUT0' is asked for twice/);
    assert.equal((await nodeCall(cluster.url, 'GET', '/v2/health/live')).status, 200);
  });
});
