import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { after, before, describe, test } from 'node:test';
import { ensemble, model, tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertStatus, floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';
import { call } from '../helpers/http.js';
import { assertClose } from '../helpers/mlp-oip.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * The Open Inference Protocol's gRPC service on a real head, agent and actors, called by a
 * @grpc/grpc-js client built from the repository's .proto: every method, raw and typed tensor
 * contents (each equal to onnxruntime in this process), classification, streaming, a graph, and
 * the errors with their gRPC codes and TROUPE_ERR_* codes.
 */

const JSON_HEADERS = { 'content-type': 'application/json' };

interface OutputTensor {
  name: string;
  datatype: string;
  shape: string[];
  contents: { fp32_contents: number[] } | null;
}
interface InferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: OutputTensor[];
  raw_output_contents: Buffer[];
}

/** BYTES elements of a raw output: each a 4-byte little-endian length, then the bytes. */
function bytesElements(raw: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at < raw.length;) {
    const length = raw.readUInt32LE(at);
    out.push(raw.toString('utf8', at + 4, at + 4 + length));
    at += 4 + length;
  }
  return out;
}

describe('gRPC: the Open Inference Protocol service', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let grpc: GrpcClient;
  const rows = 3;
  const x = seededFloats(rows * 64, 7);
  let expected: Float32Array;

  const rawRequest = (extra: Record<string, unknown> = {}) => ({
    model_name: 'mlp',
    inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64] }],
    raw_input_contents: [rawFloats(x)],
    ...extra,
  });

  before(async () => {
    cluster = await startCluster({ headArgs: ['--max-body-mib', '4'], agents: [['--cpus', '8']] });
    for (const [name, body] of [
      ['mlp', { model: 'mlp.onnx', threads: 1, cpus: 0.25, batch: { maxSize: 1 } }],
      ['slow', { model: 'mobilenet.onnx', threads: 1, cpus: 0.25, maxQueue: 1, batch: { maxSize: 1 } }],
    ] as const) {
      const put = await call(cluster.url, 'PUT', `/api/v1/deployments/${name}`, { body: JSON.stringify(body), headers: JSON_HEADERS });
      assert.equal(put.status, 201, put.body.toString());
    }
    const member = (name: string) => model(name, { path: 'mlp.onnx', cpus: 0.25, threads: 1 });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/pair', {
      body: JSON.stringify(ensemble('pair', [member('left'), member('right')], { combine: 'mean' })),
      headers: JSON_HEADERS,
    });
    assert.equal(put.status, 201, put.body.toString());
    expected = (await runInProcess(cluster.models.mlp, { x: tensor('float32', [rows, 64], x) })).logits!.data as Float32Array;
    grpc = grpcClient(cluster.grpcAddress);
  });
  after(async () => {
    grpc?.close();
    await cluster?.stop();
  });

  test('health, server and model metadata, model config, statistics and the repository index', async () => {
    assert.deepEqual(await grpc.call('ServerLive', {}), { live: true });
    assert.deepEqual(await grpc.call('ServerReady', {}), { ready: true });
    assert.deepEqual(await grpc.call('ModelReady', { name: 'mlp' }), { ready: true });
    assert.deepEqual(await grpc.call('ModelReady', { name: 'mlp', version: '1' }), { ready: true });
    assert.deepEqual(await grpc.call('ModelReady', { name: 'pair' }), { ready: true }, 'a graph is a model');
    assert.deepEqual(await grpc.call('ModelReady', { name: 'nope' }), { ready: false });
    assert.deepEqual(await grpc.call('ModelReady', { name: 'mlp', version: '2' }), { ready: false });

    const server = await grpc.call<{ name: string; version: string; extensions: string[] }>('ServerMetadata', {});
    assert.equal(server.name, 'troupe');
    assert.match(server.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(server.extensions, ((await call(cluster.url, 'GET', '/v2')).json as { extensions: string[] }).extensions);

    const meta = await grpc.call('ModelMetadata', { name: 'mlp' });
    assert.deepEqual(meta, {
      name: 'mlp',
      versions: ['1'],
      platform: 'onnx_onnxv1',
      inputs: [{ name: 'x', datatype: 'FP32', shape: ['-1', '64'] }],
      outputs: [{ name: 'logits', datatype: 'FP32', shape: ['-1', '10'] }],
    });
    assert.equal((await grpc.call<{ platform: string }>('ModelMetadata', { name: 'pair' })).platform, 'ensemble');
    // A graph's configuration is an ensemble's (the repository lists it too, below).
    const ensembleConfig = (await grpc.call<{ config: { platform: string; input: { name: string }[] } }>('ModelConfig', { name: 'pair' }))
      .config;
    assert.deepEqual([ensembleConfig.platform, ensembleConfig.input.map((t) => t.name)], ['ensemble', ['x']]);

    // The same configuration as GET /v2/models/mlp/config, field for field (int64s come as strings
    // here, and this client's decoder names each oneof's chosen field in a `*_choice` key).
    const { config } = await grpc.call<{ config: Record<string, unknown> }>('ModelConfig', { name: 'mlp' });
    const http = (await call(cluster.url, 'GET', '/v2/models/mlp/config')).json as Record<string, unknown>;
    const numeric = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(numeric)
        : value && typeof value === 'object' && !Buffer.isBuffer(value)
          ? Object.fromEntries(
              Object.entries(value)
                .filter(([k]) => !k.endsWith('_choice'))
                .map(([k, v]) => [k, numeric(v)]),
            )
          : typeof value === 'string' && /^-?\d+$/.test(value)
            ? Number(value)
            : value;
    assert.equal(config.platform, 'onnxruntime_onnx');
    for (const field of [
      'name',
      'platform',
      'backend',
      'max_batch_size',
      'input',
      'output',
      'instance_group',
      'dynamic_batching',
      'version_policy',
    ])
      assert.deepEqual(numeric(config[field]), numeric(http[field]), `ModelConfig.${field}`);

    const stats = await grpc.call<{ model_stats: { name: string; version: string }[] }>('ModelStatistics', { name: 'mlp' });
    assert.deepEqual(
      stats.model_stats.map((s) => [s.name, s.version]),
      [['mlp', '1']],
    );
    const all = await grpc.call<{ model_stats: { name: string }[] }>('ModelStatistics', {});
    assert.deepEqual(all.model_stats.map((s) => s.name).sort(), ['left', 'mlp', 'right', 'slow']);
    const index = await grpc.call<{ models: { name: string; state: string }[] }>('RepositoryIndex', { ready: true });
    assert.deepEqual(index.models.map((m) => [m.name, m.state]).sort(), [
      ['left', 'READY'],
      ['mlp', 'READY'],
      ['pair', 'READY'],
      ['right', 'READY'],
      ['slow', 'READY'],
    ]);
  });

  test('ModelInfer with raw_input_contents: raw_output_contents equal to onnxruntime in this process, the id echoed', async () => {
    const answer = await grpc.call<InferResponse>('ModelInfer', rawRequest({ id: 'req-7' }));
    assert.deepEqual([answer.model_name, answer.model_version, answer.id], ['mlp', '1', 'req-7']);
    assert.equal(answer.outputs.length, 1);
    assert.deepEqual([answer.outputs[0]!.name, answer.outputs[0]!.datatype, answer.outputs[0]!.shape], ['logits', 'FP32', ['3', '10']]);
    assert.equal(answer.outputs[0]!.contents, null, 'raw answers carry no typed contents');
    assert.equal(answer.raw_output_contents.length, 1);
    assertClose(floatsOfRaw(answer.raw_output_contents[0]!), expected, 'raw logits');
  });

  test('ModelInfer with typed contents: typed contents back, equal to onnxruntime; binary_data_output asks for raw', async () => {
    const typed = {
      model_name: 'mlp',
      model_version: '1',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64], contents: { fp32_contents: [...x] } }],
    };
    const answer = await grpc.call<InferResponse>('ModelInfer', typed);
    assert.equal(answer.raw_output_contents.length, 0);
    assert.deepEqual(answer.outputs[0]!.shape, ['3', '10']);
    assertClose(answer.outputs[0]!.contents!.fp32_contents, expected, 'typed logits');

    const asRaw = await grpc.call<InferResponse>('ModelInfer', { ...typed, parameters: { binary_data_output: { bool_param: true } } });
    assertClose(floatsOfRaw(asRaw.raw_output_contents[0]!), expected, 'raw logits of a typed request');
  });

  test('classification: the same "score:index" strings as the HTTP API, as BYTES', async () => {
    const asked = { outputs: [{ name: 'logits', parameters: { classification: { int64_param: '3' } } }] };
    const answer = await grpc.call<InferResponse>('ModelInfer', rawRequest(asked));
    assert.deepEqual([answer.outputs[0]!.datatype, answer.outputs[0]!.shape], ['BYTES', ['3', '3']]);
    const http = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
      body: JSON.stringify({
        inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64], data: [...x] }],
        outputs: [{ name: 'logits', parameters: { classification: 3 } }],
      }),
      headers: JSON_HEADERS,
    });
    const httpOut = (http.json as { outputs: { data: string[] }[] }).outputs[0]!.data;
    assert.deepEqual(bytesElements(answer.raw_output_contents[0]!), httpOut);
  });

  test('a graph is callable by ModelInfer, with the answer of its HTTP inference', async () => {
    const answer = await grpc.call<InferResponse>('ModelInfer', rawRequest({ model_name: 'pair' }));
    assert.equal(answer.model_name, 'pair');
    const http = await call(cluster.url, 'POST', '/v2/models/pair/infer', {
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64], data: [...x] }] }),
      headers: JSON_HEADERS,
    });
    assert.equal(http.status, 200, http.body.toString());
    assertClose(floatsOfRaw(answer.raw_output_contents[0]!), (http.json as { outputs: { data: number[] }[] }).outputs[0]!.data, 'graph');
  });

  test('ModelStreamInfer: one response per request, matched by id; a failed request answers with error_message and the stream goes on', async () => {
    const stream = grpc.stream();
    const responses: { error_message: string; infer_response: InferResponse }[] = [];
    const done = new Promise<void>((resolve, reject) => {
      stream.on('data', (r: { error_message: string; infer_response: InferResponse }) => responses.push(r));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    for (let i = 0; i < 4; i++) stream.write(rawRequest({ id: `s${i}` }));
    stream.write({ model_name: 'nope', id: 'bad', inputs: [] });
    stream.write(rawRequest({ id: 's4' }));
    stream.end();
    await done;
    assert.equal(responses.length, 6);
    for (const r of responses.filter((r) => r.infer_response.id !== 'bad')) {
      assert.equal(r.error_message, '');
      assertClose(floatsOfRaw(r.infer_response.raw_output_contents[0]!), expected, `stream ${r.infer_response.id}`);
    }
    assert.deepEqual(responses.map((r) => r.infer_response.id).sort(), ['bad', 's0', 's1', 's2', 's3', 's4']);
    const failed = responses.find((r) => r.infer_response.id === 'bad')!;
    assert.match(failed.error_message, /^TROUPE_ERR_UNKNOWN_DEPLOYMENT: unknown model 'nope'/);
  });

  test('ModelStreamInfer holds at most 128 requests in flight and reads on as answers leave: 300 written before any is read all come back', async () => {
    const stream = grpc.stream();
    for (let i = 0; i < 300; i++) stream.write(rawRequest({ id: `b${i}` }));
    stream.end();
    // Read only now: the server has paused the stream meanwhile, and must resume it as answers are taken.
    const ids = new Set<string>();
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (r: { error_message: string; infer_response: InferResponse }) => {
        assert.equal(r.error_message, '');
        ids.add(r.infer_response.id);
      });
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    assert.equal(ids.size, 300);
  });

  test('errors: NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED, each with its TROUPE_ERR_* code', async () => {
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ model_name: 'nope' })),
      status.NOT_FOUND,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /'nope'/,
    );
    await assertStatus(grpc.call('ModelMetadata', { name: 'nope' }), status.NOT_FOUND, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /'nope'/);
    // A method of Triton's service that Troupe does not serve (model load is on HTTP).
    const unserved = await new Promise<{ code: number } | null>((resolve) =>
      grpc.client.makeUnaryRequest(
        '/inference.GRPCInferenceService/RepositoryModelLoad',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.alloc(0),
        (err) => resolve(err),
      ),
    );
    assert.equal(unserved?.code, status.UNIMPLEMENTED);
    await assertStatus(
      grpc.call('ModelConfig', { name: 'mlp', version: '9' }),
      status.NOT_FOUND,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /version '9'/,
    );
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ raw_input_contents: [rawFloats(x).subarray(4)] })),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_TENSOR',
      /float32\[3,64\] needs 768 bytes, got 764/,
    );
    await assertStatus(
      grpc.call(
        'ModelInfer',
        rawRequest({
          raw_input_contents: [],
          inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 64], contents: { fp32_contents: [1] } }],
        }),
      ),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_TENSOR',
      /holds 192 elements, contents.fp32_contents has 1/,
    );
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ raw_input_contents: [rawFloats(x), rawFloats(x)] })),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_REQUEST',
      /raw_input_contents has 2 entries for 1 inputs/,
    );
    await assertStatus(
      grpc.call('ModelInfer', {
        model_name: 'mlp',
        inputs: [{ name: 'x', datatype: 'FP16', shape: [1, 64], contents: { fp32_contents: [] } }],
      }),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_TENSOR',
      /FP16 has no typed contents field/,
    );
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ inputs: [{ name: 'x', datatype: 'FP99', shape: [rows, 64] }] })),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_TENSOR',
      /unknown datatype 'FP99'/,
    );
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ inputs: [{ name: 'y', datatype: 'FP32', shape: [rows, 64] }] })),
      status.INVALID_ARGUMENT,
      'TROUPE_ERR_BAD_INPUT',
      /'y'/,
    );
    // A declared shape far beyond what a request may hold is refused before anything is built.
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: ['4000000000', 64] }] })),
      status.RESOURCE_EXHAUSTED,
      'TROUPE_ERR_TOO_MANY_ELEMENTS',
      /declare 256000000000 elements/,
    );
    // Past --max-body-mib (4): refused by the server before the message is decoded.
    await assert.rejects(
      grpc.call('ModelInfer', rawRequest({ raw_input_contents: [Buffer.alloc(5 * 2 ** 20)] })),
      (err: { code: number }) => {
        assert.equal(err.code, status.RESOURCE_EXHAUSTED);
        return true;
      },
    );
    // Triton's timeout parameter (microseconds): below a millisecond, spent before the call is sent.
    await assertStatus(
      grpc.call('ModelInfer', rawRequest({ parameters: { timeout: { int64_param: '1' } } })),
      status.DEADLINE_EXCEEDED,
      'TROUPE_ERR_DEADLINE_EXCEEDED',
      /deadline passed/,
    );
    // The call's own deadline: a MobileNet batch of 4 cannot finish in 5 ms. (Its body stays under
    // --max-body-mib: a batch of 8 was past it, and where the server's refusal of the size came back
    // within the 5 ms the call failed with RESOURCE_EXHAUSTED instead.)
    const big = rawFloats(seededFloats(4 * 3 * 224 * 224, 3));
    assert.ok(big.length < 4 * 2 ** 20);
    await assert.rejects(
      grpc.call(
        'ModelInfer',
        { model_name: 'slow', inputs: [{ name: 'image', datatype: 'FP32', shape: [4, 3, 224, 224] }], raw_input_contents: [big] },
        { deadlineMs: 5 },
      ),
      (err: { code: number }) => {
        assert.equal(err.code, status.DEADLINE_EXCEEDED);
        return true;
      },
    );
  });

  test('a full queue: RESOURCE_EXHAUSTED with TROUPE_ERR_OVERLOADED and retry-after, the accepted calls all answered', async () => {
    const image = rawFloats(seededFloats(4 * 3 * 224 * 224, 9));
    const request = {
      model_name: 'slow',
      inputs: [{ name: 'image', datatype: 'FP32', shape: [4, 3, 224, 224] }],
      raw_input_contents: [image],
    };
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, () =>
        grpc.call('ModelInfer', request).then(
          () => 'ok',
          (err: { code: number; details: string; metadata: { get(key: string): unknown[] } }) => {
            assert.equal(err.code, status.RESOURCE_EXHAUSTED, err.details);
            assert.match(err.details, /^TROUPE_ERR_OVERLOADED: /);
            assert.deepEqual(err.metadata.get('retry-after'), ['1']);
            return 'overloaded';
          },
        ),
      ),
    );
    assert.ok(outcomes.includes('overloaded'), outcomes.join(' '));
    assert.ok(outcomes.includes('ok'), outcomes.join(' '));
  });

  test('/metrics counts gRPC calls by method and outcome, and their inferences with the model', async () => {
    const metrics = async () => (await call(cluster.url, 'GET', '/metrics')).body.toString();
    const value = (text: string, prefix: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(prefix))
          ?.split(' ')
          .pop() ?? 0,
      );
    // Front-door workers serve the inferences and report their counts to the head twice a second.
    const counted = (text: string) =>
      value(text, 'troupe_grpc_requests_total{method="ModelInfer",outcome="ok"}') >= 5 &&
      value(text, 'troupe_grpc_requests_total{method="ModelStreamInfer",outcome="ok"}') >= 5 &&
      value(text, 'troupe_grpc_requests_total{method="ModelInfer",outcome="TROUPE_ERR_UNKNOWN_DEPLOYMENT"}') >= 1 &&
      value(text, 'troupe_inference_request_success_total{model="mlp"}') >= 10;
    let last = '';
    await waitFor('the workers to report their gRPC calls', async () => counted((last = await metrics()))).catch((err: Error) => {
      assert.fail(`${err.message}\n${last}`);
    });
  });
});
