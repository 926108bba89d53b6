import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import { tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import { childrenRunning } from '../helpers/processes.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { inferResult, pythonGzipCompress, tritonInfer } from '../helpers/triton-client.js';
import type { TritonInput, TritonOutput } from '../helpers/triton-client.js';

/**
 * Triton's Python HTTP client against a real cluster, request by request as it builds them
 * (test/helpers/triton-client.ts follows its sources): binary and JSON tensors, classification
 * (`class_count`), request and response compression, and Triton's raw binary request (what curl
 * or perf_analyzer send: the input's bytes alone, Inference-Header-Content-Length: 0). Numbers are
 * checked exactly against onnxruntime run in this process. Both servers of the inference route
 * run the same checks: a front-door worker, and the head itself (--http-workers 0).
 */

const ROWS = 3;
const X = seededFloats(ROWS * 64, 11);
const X_BYTES = new Uint8Array(X.buffer, X.byteOffset, X.byteLength);
/** Labels for the first five classes only: indices 5-9 answer "score:index", as Triton does past its label file. */
const NAMES = ['zero', 'one', 'two', 'three', 'four'];

const binaryX: TritonInput = { name: 'x', shape: [ROWS, 64], datatype: 'FP32', bytes: X_BYTES };
/** Enough rows for an answer over the 1 KiB below which responses are not compressed. */
const BIG_ROWS = 64;
const BIG_X = seededFloats(BIG_ROWS * 64, 12);
const bigX: TritonInput = {
  name: 'x',
  shape: [BIG_ROWS, 64],
  datatype: 'FP32',
  bytes: new Uint8Array(BIG_X.buffer, BIG_X.byteOffset, BIG_X.byteLength),
};

/**
 * The classes Triton's server writes for one row, computed here independently of the head's
 * formatter: toFixed(6) equals printf's "%f" except at exact ties in the seventh decimal, which
 * these logits do not have (the unit tests cover ties).
 */
function expectedClasses(logits: Float32Array, k: number): string[] {
  const out: string[] = [];
  for (let row = 0; row < ROWS; row++) {
    const scores = [...logits.subarray(row * 10, row * 10 + 10)];
    const ranked = scores.map((v, i) => ({ v, i })).sort((a, b) => b.v - a.v || a.i - b.i);
    for (const { v, i } of ranked.slice(0, k)) out.push(`${v.toFixed(6)}:${i}${i < NAMES.length ? `:${NAMES[i]}` : ''}`);
  }
  return out;
}

for (const mode of [
  { what: 'served by a front-door worker', headArgs: ['--http-workers', '1', '--no-http-handoff'], workers: 1, labels: NAMES as unknown },
  { what: 'served by the head (--http-workers 0)', headArgs: ['--http-workers', '0'], workers: 0, labels: { logits: NAMES } as unknown },
]) {
  describe(`Triton's Python HTTP client, ${mode.what}`, { timeout: 150_000 }, () => {
    let cluster: TestCluster;
    let logits: Float32Array;
    let bigLogits: Float32Array;

    const send = (request: { path: string; body: Buffer; headers: Record<string, string> }) =>
      nodeCall(cluster.url, 'POST', request.path, { body: request.body, headers: request.headers });
    const infer = async (inputs: TritonInput[], outputs: TritonOutput[] | undefined, options: Parameters<typeof tritonInfer>[3] = {}) => {
      const answer = await send(tritonInfer('mlp', inputs, outputs, options));
      assert.equal(answer.status, 200, answer.body.toString());
      return { answer, ...inferResult(answer.headers, answer.body) };
    };

    before(async () => {
      cluster = await startCluster({ headArgs: [...mode.headArgs, '--max-body-mib', '1'] });
      const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
        body: JSON.stringify({ model: 'mlp.onnx', threads: 1, labels: mode.labels }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(put.status, 201, put.body.toString());
      logits = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [ROWS, 64], X) })).logits!.data as Float32Array;
      bigLogits = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [BIG_ROWS, 64], BIG_X) })).logits!.data as Float32Array;
      // Until its worker runs, the head serves every connection itself.
      if (mode.workers)
        await waitFor(
          'the front-door worker',
          async () => (await childrenRunning(cluster.head.process.pid!, 'front-door/worker-main')).length === mode.workers,
          30_000,
        );
    });
    after(async () => {
      await cluster?.stop();
    });

    test('binary tensors both ways (set_data_from_numpy, InferRequestedOutput defaults), and binary_data_output when no output is named', async () => {
      const named = await infer([binaryX], [{ name: 'logits' }], { requestId: 'r1' });
      assert.equal(named.answer.headers['content-type'], 'application/octet-stream');
      assert.equal(named.result.id, 'r1');
      const out = named.outputs.get('logits')!;
      assert.deepEqual([out.datatype, out.shape], ['FP32', [ROWS, 10]]);
      assert.deepEqual(out.data, [...logits]);
      const all = await infer([binaryX], undefined);
      assert.deepEqual(all.outputs.get('logits')!.data, [...logits]);
    });

    test('priority, a sequence id, custom parameters and query_params, as the client adds them, change nothing in the answer', async () => {
      const { outputs, result } = await infer([binaryX], [{ name: 'logits' }], {
        requestId: 'with-extras',
        priority: 2,
        sequenceId: 7,
        sequenceStart: true,
        parameters: { my_flag: 'on', my_count: 3 },
        queryParams: { trace: 'a b', n: '1' },
      });
      assert.equal(result.id, 'with-extras');
      assert.deepEqual(outputs.get('logits')!.data, [...logits]);
    });

    test('JSON tensors (binary_data=False): Python floats in, JSON numbers out', async () => {
      const values = [...X].map((v) => ({ float: v }));
      const { answer, outputs } = await infer(
        [{ name: 'x', shape: [ROWS, 64], datatype: 'FP32', values }],
        [{ name: 'logits', binaryData: false }],
      );
      assert.match(String(answer.headers['content-type']), /^application\/json/);
      assert.equal(answer.headers['inference-header-content-length'], undefined);
      assert.deepEqual(outputs.get('logits')!.data, [...logits]);
    });

    test('class_count=3 answers BYTES [batch, 3] "score:index[:label]", binary or JSON, as Triton formats them', async () => {
      for (const binaryData of [true, false]) {
        const { outputs } = await infer([binaryX], [{ name: 'logits', binaryData, classCount: 3 }]);
        const out = outputs.get('logits')!;
        assert.deepEqual([out.datatype, out.shape], ['BYTES', [ROWS, 3]], `binary_data=${binaryData}`);
        assert.deepEqual(out.data, expectedClasses(logits, 3), `binary_data=${binaryData}`);
      }
      // More classes than the output has: all of them, ranked (Triton's min(k, classes)).
      const { outputs } = await infer([binaryX], [{ name: 'logits', classCount: 25 }]);
      assert.deepEqual(outputs.get('logits')!.shape, [ROWS, 10]);
      assert.deepEqual(outputs.get('logits')!.data, expectedClasses(logits, 10));
    });

    test('a classification that is not a whole number of classes is refused before the model runs', async () => {
      for (const bad of ['-1', '"three"', '1.5']) {
        const body = `{"inputs": [{"name": "x", "shape": [${ROWS}, 64], "datatype": "FP32", "parameters": {"binary_data_size": ${X_BYTES.byteLength}}}], "outputs": [{"name": "logits", "parameters": {"classification": ${bad}}}]}`;
        const answer = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
          body: Buffer.concat([Buffer.from(body), X_BYTES]),
          headers: { 'Inference-Header-Content-Length': String(body.length) },
        });
        assertError(answer, 400, 'TROUPE_ERR_BAD_REQUEST', /output 'logits': parameters\.classification must be a whole number/);
      }
    });

    test('request_compression_algorithm and response_compression_algorithm, gzip and deflate, each way', async () => {
      const plain = await infer([bigX], [{ name: 'logits' }]);
      for (const requestCompression of [undefined, 'gzip', 'deflate'] as const) {
        for (const responseCompression of [undefined, 'gzip', 'deflate'] as const) {
          const what = `request ${requestCompression ?? 'plain'}, response ${responseCompression ?? 'plain'}`;
          const { answer, outputs } = await infer([bigX], [{ name: 'logits' }], {
            ...(requestCompression ? { requestCompression } : {}),
            ...(responseCompression ? { responseCompression } : {}),
          });
          assert.equal(answer.headers['content-encoding'], responseCompression, what);
          assert.deepEqual(outputs.get('logits')!.data, [...bigLogits], what);
          const decoded =
            responseCompression === 'gzip'
              ? gunzipSync(answer.body)
              : responseCompression === 'deflate'
                ? inflateSync(answer.body)
                : answer.body;
          assert.ok(decoded.equals(plain.answer.body), `${what}: the same bytes as the uncompressed answer`);
          assert.equal(answer.headers['inference-header-content-length'], plain.answer.headers['inference-header-content-length'], what);
        }
      }
      // An answer under 1 KiB goes uncompressed, which the client reads as well (it looks at Content-Encoding).
      const classes = await infer([binaryX], [{ name: 'logits', classCount: 3 }], {
        requestCompression: 'gzip',
        responseCompression: 'gzip',
      });
      assert.equal(classes.answer.headers['content-encoding'], undefined);
      assert.deepEqual(classes.outputs.get('logits')!.data, expectedClasses(logits, 3));
    });

    test('another Content-Encoding is refused with 415 naming the ones accepted; a zip bomb with 413; broken gzip with 400', async () => {
      const json = JSON.stringify({ inputs: [{ name: 'x', shape: [ROWS, 64], datatype: 'FP32', data: [...X] }] });
      const br = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        body: json,
        headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
      });
      assertError(br, 415, 'TROUPE_ERR_UNSUPPORTED_ENCODING', /Content-Encoding 'br' is not supported/);
      assert.equal(br.headers['accept-encoding'], 'gzip, deflate');
      // 4 MiB of zeros is about 4 KB of gzip; it decodes past the 1 MiB limit, and is stopped there.
      const bomb = pythonGzipCompress(Buffer.alloc(4 * 2 ** 20), 0);
      assert.ok(bomb.length < 16 * 1024);
      const refused = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        body: bomb,
        headers: { 'content-encoding': 'gzip', 'inference-header-content-length': '10' },
      });
      assertError(refused, 413, 'TROUPE_ERR_BODY_TOO_LARGE', /gzip request body decodes to more than this head accepts \(1 MiB/);
      const broken = gzipSync(Buffer.from(json)).subarray(0, 40);
      assertError(
        await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: broken, headers: { 'content-encoding': 'gzip' } }),
        400,
        'TROUPE_ERR_BAD_REQUEST',
        /not valid gzip data/,
      );
      // The head still serves after each refusal.
      assert.deepEqual((await infer([binaryX], [{ name: 'logits' }])).outputs.get('logits')!.data, [...logits]);
    });

    test('a raw binary request (Inference-Header-Content-Length: 0): the batch from the byte length, every output binary', async () => {
      const headers = { 'Inference-Header-Content-Length': '0', 'Content-Type': 'application/octet-stream' };
      const raw = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: Buffer.from(X_BYTES), headers });
      assert.equal(raw.status, 200, raw.body.toString());
      const { outputs } = inferResult(raw.headers, raw.body);
      assert.deepEqual(outputs.get('logits')!.shape, [ROWS, 10]);
      assert.deepEqual(outputs.get('logits')!.data, [...logits]);
      // One row alone; and many, compressed both ways.
      const one = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: Buffer.from(X_BYTES.subarray(0, 256)), headers });
      assert.equal(one.status, 200, one.body.toString());
      assert.deepEqual(inferResult(one.headers, one.body).outputs.get('logits')!.data, [...logits.subarray(0, 10)]);
      const many = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        body: gzipSync(Buffer.from(bigX.bytes!)),
        headers: { ...headers, 'Content-Encoding': 'gzip', 'Accept-Encoding': 'deflate' },
      });
      assert.equal(many.status, 200, many.body.toString());
      assert.equal(many.headers['content-encoding'], 'deflate');
      const big = inferResult(many.headers, many.body).outputs.get('logits')!;
      assert.deepEqual([big.shape, big.data], [[BIG_ROWS, 10], [...bigLogits]]);
      const ragged = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', { body: Buffer.from(X_BYTES.subarray(0, 300)), headers });
      assertError(
        ragged,
        400,
        'TROUPE_ERR_BAD_REQUEST',
        /raw input 'x': the body's 300 bytes are not a whole number of FP32 \[-1, 64\] slices \(256 bytes each\)/,
      );
    });

    if (mode.workers) {
      test('the front-door worker, not the head, answered these requests', async () => {
        // Workers report what they served twice a second; every successful request above counts.
        const served = async () =>
          Number(
            (await call(cluster.url, 'GET', '/metrics')).body
              .toString()
              .split('\n')
              .find((l) => l.startsWith('troupe_front_door_requests_total{model="mlp",outcome="ok"}'))
              ?.split(' ')
              .pop() ?? 0,
          );
        await waitFor('the worker to report all 21 requests answered 200', async () => (await served()) >= 21, 10_000);
      });
    }
  });
}
