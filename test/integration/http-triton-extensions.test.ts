import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';
import {
  getInferenceStatistics,
  getModelConfig,
  getModelRepositoryIndex,
  loadModel,
  unloadModel,
} from '../helpers/triton-client-extensions.js';
import type { TritonRequest } from '../helpers/triton-client-extensions.js';

/**
 * Triton's extensions as tritonclient.http (src/python/library/tritonclient/http/_client.py)
 * sends them, request by request: get_model_config and get_inference_statistics are GETs without
 * a body; get_model_repository_index POSTs an empty body; load_model POSTs rapidjson.dumps({}) and
 * unload_model rapidjson.dumps({"parameters": {"unload_dependents": False}}), with no Content-Type
 * (geventhttpclient sets none) and the caller's headers (here the cluster token).
 */

const TOKEN = 'triton-ext-token-51c9';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const CLIENT_HEADERS = { 'user-agent': 'python/gevent-http-client-1.5.3' };

interface DurationStat {
  count: number;
  ns: number;
}
interface ModelStat {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<string, DurationStat>;
  batch_stats: { batch_size: number; compute_input: DurationStat; compute_infer: DurationStat; compute_output: DurationStat }[];
}

describe('HTTP: Triton model configuration, repository and statistics extensions', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  /** One request as tritonclient.http sends it, with the caller's headers. */
  const send = (request: TritonRequest, headers: Record<string, string> = {}) =>
    nodeCall(cluster.url, request.method, request.path, {
      ...(request.body !== undefined ? { body: request.body } : {}),
      headers: { ...CLIENT_HEADERS, ...headers },
    });
  const get = (path: string) => nodeCall(cluster.url, 'GET', path, { headers: CLIENT_HEADERS });
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    nodeCall(cluster.url, 'POST', path, { body, headers: { ...CLIENT_HEADERS, ...headers } });
  const inferRows = (model: string, rows: number, seed: number) =>
    call(cluster.url, 'POST', `/v2/models/${model}/infer`, {
      body: JSON.stringify({
        inputs: [{ name: 'x', shape: [rows, 64], datatype: 'FP32', data: Array.from(seededFloats(rows * 64, seed)) }],
      }),
      headers: { 'content-type': 'application/json' },
    });
  const statsOf = async (request: TritonRequest): Promise<ModelStat[]> => {
    const answer = await send(request);
    assert.equal(answer.status, 200, answer.body.toString());
    return (answer.json as { model_stats: ModelStat[] }).model_stats;
  };

  before(async () => {
    cluster = await startCluster({ headArgs: ['--token', TOKEN], agents: [['--token', TOKEN]] });
    client = await connect(cluster.url, { token: TOKEN });
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1, cpus: 0.5, batch: { maxSize: 1 } });
    await client.deploy({ name: 'mlp8', model: 'mlp.onnx', threads: 1, cpus: 0.5, batch: { maxSize: 8, preferredSizes: [4, 8] } });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('server metadata lists the extensions; the OpenAPI document describes their routes', async () => {
    const meta = (await get('/v2')).json as { extensions: string[] };
    for (const ext of ['model_configuration', 'model_repository', 'statistics']) assert.ok(meta.extensions.includes(ext), ext);
    const paths = ((await get('/docs')).json as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }).paths;
    for (const [path, method] of [
      ['/v2/models/{name}/config', 'get'],
      ['/v2/models/{name}/versions/{version}/config', 'get'],
      ['/v2/models/stats', 'get'],
      ['/v2/models/{name}/stats', 'get'],
      ['/v2/models/{name}/versions/{version}/stats', 'get'],
      ['/v2/repository/index', 'post'],
      ['/v2/repository/models/{name}/load', 'post'],
      ['/v2/repository/models/{name}/unload', 'post'],
    ] as const) {
      assert.ok(paths[path]?.[method]?.responses['200'], `${method} ${path} in /docs`);
    }
  });

  test("get_model_config: Triton's model_config, batching as max_batch_size with the batch axis left out of dims", async () => {
    const batching = await send(getModelConfig('mlp8'));
    assert.equal(batching.status, 200, batching.body.toString());
    assert.deepEqual(batching.json, {
      name: 'mlp8',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      version_policy: { latest: { num_versions: 1 } },
      max_batch_size: 8,
      input: [
        {
          name: 'x',
          data_type: 'TYPE_FP32',
          format: 'FORMAT_NONE',
          dims: [64],
          is_shape_tensor: false,
          allow_ragged_batch: false,
          optional: false,
        },
      ],
      output: [{ name: 'logits', data_type: 'TYPE_FP32', dims: [10], label_filename: '', is_shape_tensor: false }],
      instance_group: [{ name: 'mlp8', kind: 'KIND_CPU', count: 1, gpus: [] }],
      dynamic_batching: {
        preferred_batch_size: [4, 8],
        max_queue_delay_microseconds: 0,
        preserve_ordering: false,
        default_queue_policy: {
          timeout_action: 'REJECT',
          default_timeout_microseconds: 0,
          allow_timeout_override: true,
          max_queue_size: 1024,
        },
      },
      parameters: {},
    });
    assert.deepEqual((await send(getModelConfig('mlp8', '1'))).json, batching.json);

    const single = (await send(getModelConfig('mlp'))).json as {
      max_batch_size: number;
      input: { dims: number[] }[];
      dynamic_batching?: unknown;
    };
    assert.equal(single.max_batch_size, 0);
    assert.deepEqual(single.input[0]!.dims, [-1, 64], 'without batching, dims are the whole shape');
    assert.equal(single.dynamic_batching, undefined);

    assertError(await send(getModelConfig('nope')), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /unknown model 'nope'/);
    assertError(await send(getModelConfig('mlp', '2')), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /model 'mlp' has no version '2'/);
  });

  test('get_inference_statistics: rows, executions and per-request times from HTTP and SDK calls alike', async () => {
    const started = Date.now();
    // HTTP requests (served by the front-door workers), an SDK run (straight to the replica) and a
    // traced one (traces are kept by the head, so it goes through the head's queue).
    for (const [rows, seed] of [
      [3, 1],
      [5, 2],
    ] as const)
      assert.equal((await inferRows('mlp8', rows, seed)).status, 200);
    await client.run('mlp8', { x: tensor('float32', [2, 64], seededFloats(128, 3)) });
    const traced = client.run('mlp8', { x: tensor('float32', [1, 64], seededFloats(64, 4)) }, { trace: true });
    await traced;
    assert.ok((await traced.trace())?.length, 'the traced run went through the head');

    const [stat] = await waitFor('the actor to report 11 rows', async () => {
      const s = await statsOf(getInferenceStatistics('mlp8'));
      return s[0]?.inference_count === 11 ? s : undefined;
    });
    const s = stat!;
    assert.equal(s.name, 'mlp8');
    assert.equal(s.version, '1');
    const calls = 4;
    const {
      success,
      fail,
      queue,
      compute_input: input,
      compute_infer: infer,
      compute_output: output,
    } = s.inference_stats as Record<string, DurationStat>;
    assert.equal(success!.count, calls);
    assert.deepEqual(fail, { count: 0, ns: 0 });
    for (const [name, d] of Object.entries({ queue, input, infer, output })) assert.equal(d!.count, calls, name);
    assert.ok(infer!.ns > 0, 'the model ran for some time');
    assert.ok(success!.ns >= infer!.ns, `success ${success!.ns} ns covers compute ${infer!.ns} ns`);
    assert.ok(s.execution_count >= 1 && s.execution_count <= calls, `executions ${s.execution_count}`);
    assert.equal(
      s.batch_stats.reduce((n, b) => n + b.compute_infer.count, 0),
      s.execution_count,
      'each execution has one batch size',
    );
    assert.ok(s.last_inference >= started - 1000 && s.last_inference <= Date.now(), `last_inference ${s.last_inference}`);
    assert.deepEqual(s.inference_stats.cache_hit, { count: 0, ns: 0 });

    // A deployment that does not batch (max_batch_size 0) counts a request as one inference, as Triton does.
    assert.equal((await inferRows('mlp', 3, 5)).status, 200);
    const [single] = await waitFor('the unbatched actor to report', async () => {
      const m = await statsOf(getInferenceStatistics('mlp'));
      return m[0]?.execution_count === 1 ? m : undefined;
    });
    assert.equal(single!.inference_count, 1);
    assert.equal(single!.inference_stats.success!.count, 1);
    assert.deepEqual(
      single!.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]),
      [[1, 1]],
    );

    assert.deepEqual(await statsOf(getInferenceStatistics('mlp8', '1')), [s]);
    const all = await statsOf(getInferenceStatistics());
    assert.deepEqual(all, [single, s]);
    assertError(await send(getInferenceStatistics('nope')), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /unknown model 'nope'/);
    assertError(await send(getInferenceStatistics('mlp8', '7')), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /no version '7'/);
  });

  test('repository: index, unload (replicas stop, the spec stays) and load (they start again), writes with the token', async () => {
    const index = await send(getModelRepositoryIndex());
    assert.equal(index.status, 200, index.body.toString());
    assert.deepEqual(index.json, [
      { name: 'mlp', version: '1', state: 'READY', reason: '' },
      { name: 'mlp8', version: '1', state: 'READY', reason: '' },
    ]);
    const pid = ((await call(cluster.url, 'GET', '/api/v1/deployments/mlp')).json as { actors: { pid: number }[] }).actors[0]!.pid;

    assertError(
      await send(unloadModel('mlp')),
      401,
      'TROUPE_ERR_UNAUTHORIZED',
      /missing cluster token: POST \/v2\/repository\/models\/:name\/unload/,
    );
    assertError(await send(loadModel('mlp')), 401, 'TROUPE_ERR_UNAUTHORIZED', /missing cluster token/);
    const unloaded = await send(unloadModel('mlp'), AUTH);
    assert.equal(unloaded.status, 200, unloaded.body.toString());
    assert.equal(unloaded.body.length, 0);
    await waitFor('the unloaded replica to exit', () => !isAlive(pid), 30_000);

    const after = (await send(getModelRepositoryIndex())).json as { name: string; state: string; reason: string }[];
    assert.equal(after[0]!.state, 'UNAVAILABLE');
    assert.match(after[0]!.reason, /unloaded/);
    assert.deepEqual(
      ((await post('/v2/repository/index', JSON.stringify({ ready: true }))).json as { name: string }[]).map((e) => e.name),
      ['mlp8'],
    );
    assert.equal((await get('/v2/models/mlp/ready')).status, 400);
    assertError(await inferRows('mlp', 1, 8), 503, 'TROUPE_ERR_NOT_READY', /mlp/);
    const kept = (await call(cluster.url, 'GET', '/api/v1/deployments/mlp')).json as { model: string; replicas: number };
    assert.equal(kept.model, 'mlp.onnx', 'the deployment and its spec stay');
    assert.equal(kept.replicas, 0);
    assert.equal((await send(unloadModel('mlp'), AUTH)).status, 200, 'unloading twice changes nothing');

    const loaded = await send(loadModel('mlp'), AUTH);
    assert.equal(loaded.status, 200, loaded.body.toString());
    assert.equal(loaded.body.length, 0);
    assert.equal((await get('/v2/models/mlp/ready')).status, 200, 'load answers once the replica is READY');
    assert.equal(((await call(cluster.url, 'GET', '/api/v1/deployments/mlp')).json as { replicas: number }).replicas, 1);
    assert.equal((await inferRows('mlp', 1, 9)).status, 200);
    assert.deepEqual(
      ((await send(getModelRepositoryIndex())).json as { state: string }[]).map((e) => e.state),
      ['READY', 'READY'],
    );

    assertError(
      await send(loadModel('mlp', '{"max_batch_size": 4}'), AUTH),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /load takes no parameters here \(got 'config'\)/,
    );
    assertError(await send(loadModel('nope'), AUTH), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /unknown model 'nope'/);
    assertError(await post('/v2/repository/index', '{"ready": "yes"'), 400, 'TROUPE_ERR_BAD_REQUEST', /not valid JSON/);
    assertError(await post('/v2/repository/index', '{"ready": "yes"}'), 400, 'TROUPE_ERR_BAD_REQUEST', /ready/);
  });
});
