import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, fn, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT } from '../helpers/graphs.js';
import { assertError, binaryBody, call } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

interface OipOutput {
  name: string;
  datatype: string;
  shape: number[];
  data: number[];
}
interface Job {
  id: string;
  deployment: string;
  state: 'QUEUED' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
  created: string;
  started: string | null;
  finished: string | null;
  error?: { code: string; message: string };
  result?: { model_name: string; model_version: string; id?: string; outputs: OipOutput[] };
}

describe('HTTP: async jobs', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const x = seededFloats(2 * 64, 11);
  let sdkLogits: number[];

  const xInput = { name: 'x', shape: [2, 64], datatype: 'FP32', data: [...x] };
  const msInput = (ms: number) => ({ name: 'ms', shape: [1], datatype: 'FP32', data: [ms] });
  const submit = (name: string, body: unknown) =>
    call(cluster.url, 'POST', `/api/v1/deployments/${name}/jobs`, { body: JSON.stringify(body), headers: JSON_HEADERS });
  const get = async (id: string) => {
    const answer = await call(cluster.url, 'GET', `/api/v1/jobs/${id}`);
    assert.equal(answer.status, 200, answer.body.toString());
    return answer.json as Job;
  };
  const until = (id: string, states: Job['state'][], timeoutMs = 30_000) =>
    waitFor(
      `job ${id} to be ${states.join(' or ')}`,
      async () => {
        const job = await get(id);
        return states.includes(job.state) ? job : undefined;
      },
      timeoutMs,
    );

  before(async () => {
    // One run slot, so a second job visibly waits QUEUED behind a slow one; finished jobs are
    // kept 5 s, so one of them can be seen to go.
    cluster = await startCluster({ agents: [GRAPH_AGENT], headArgs: ['--job-concurrency', '1', '--job-ttl-s', '5'] });
    client = await connect(cluster.url);
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    // A long graph: a fn that sleeps for 'ms' and passes the rest on, then the model.
    await client.deploy(pipeline('slow', [fn('sleepy', `${FNS}#sleepy`), model('mlp')]));
    await client.deploy(fn('boom', `${FNS}#boom`));
    const out = await client.run('mlp', { x: tensor('float32', [2, 64], x) });
    sdkLogits = [...(out.logits!.data as Float32Array)];
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a job answers 202 at once; once SUCCEEDED its result is the OIP response, with the numbers the SDK gets', async () => {
    const answer = await submit('mlp', { id: 'req-7', inputs: [xInput] });
    assert.equal(answer.status, 202, answer.body.toString());
    const job = answer.json as Job;
    assert.match(job.id, /^[A-Za-z0-9_-]+$/);
    assert.equal(answer.headers.get('location'), `/api/v1/jobs/${job.id}`);
    assert.equal(job.deployment, 'mlp');
    assert.ok(['QUEUED', 'RUNNING'].includes(job.state), job.state);
    assert.ok(!Number.isNaN(Date.parse(job.created)));

    const done = await until(job.id, ['SUCCEEDED', 'FAILED']);
    assert.equal(done.state, 'SUCCEEDED', JSON.stringify(done.error));
    assert.ok(done.started && done.finished);
    assert.equal(done.result?.model_name, 'mlp');
    assert.equal(done.result?.model_version, '1');
    assert.equal(done.result?.id, 'req-7', 'the request id is echoed, as in an inference');
    const [logits] = done.result!.outputs;
    assert.equal(logits?.name, 'logits');
    assert.equal(logits?.datatype, 'FP32');
    assert.deepEqual(logits?.shape, [2, 10]);
    assert.deepEqual(logits?.data, sdkLogits);
  });

  test('binary inputs are accepted; outputs can be selected', async () => {
    const { body, headers } = binaryBody(
      {
        inputs: [{ name: 'x', shape: [2, 64], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } }],
        outputs: [{ name: 'logits' }],
      },
      [new Uint8Array(x.buffer, x.byteOffset, x.byteLength)],
    );
    const answer = await call(cluster.url, 'POST', '/api/v1/deployments/mlp/jobs', { body, headers });
    assert.equal(answer.status, 202, answer.body.toString());
    const done = await until((answer.json as Job).id, ['SUCCEEDED', 'FAILED']);
    assert.deepEqual(
      done.result?.outputs.map((o) => o.name),
      ['logits'],
    );
    assert.deepEqual(done.result?.outputs[0]?.data, sdkLogits);
    // Triton's classification extension, as the inference route answers it (no labels here).
    const classified = await submit('mlp', { inputs: [xInput], outputs: [{ name: 'logits', parameters: { classification: 2 } }] });
    const top = (await until((classified.json as Job).id, ['SUCCEEDED', 'FAILED'])).result?.outputs[0];
    const want = [0, 1].flatMap((row) =>
      sdkLogits
        .slice(row * 10, row * 10 + 10)
        .map((v, i) => ({ v, i }))
        .sort((a, b) => b.v - a.v)
        .slice(0, 2)
        .map(({ v, i }) => `${v.toFixed(6)}:${i}`),
    );
    assert.deepEqual([top?.datatype, top?.shape, top?.data], ['BYTES', [2, 2], want]);
  });

  test('a graph job: RUNNING while it works, a second job QUEUED behind it; cancelling either', async () => {
    const slow = (await submit('slow', { inputs: [xInput, msInput(3000)] })).json as Job;
    await until(slow.id, ['RUNNING']);
    const queued = await submit('slow', { inputs: [xInput, msInput(10)] });
    assert.equal(queued.status, 202, queued.body.toString());
    assert.equal((queued.json as Job).state, 'QUEUED', 'the only run slot is taken');
    const behind = (queued.json as Job).id;

    const cancelled = await call(cluster.url, 'DELETE', `/api/v1/jobs/${behind}`);
    assert.equal(cancelled.status, 200, cancelled.body.toString());
    assert.equal((cancelled.json as Job).state, 'CANCELLED');
    const stopped = await call(cluster.url, 'DELETE', `/api/v1/jobs/${slow.id}`);
    assert.equal((stopped.json as Job).state, 'CANCELLED');

    // A job submitted now runs once the cancelled graph's steps have finished on the actors.
    const next = (await submit('slow', { inputs: [xInput, msInput(10)] })).json as Job;
    const done = await until(next.id, ['SUCCEEDED', 'FAILED']);
    assert.equal(done.state, 'SUCCEEDED', JSON.stringify(done.error));
    assert.deepEqual(
      done.result?.outputs.map((o) => o.name),
      ['logits'],
    );
    assert.deepEqual(done.result?.outputs[0]?.data, sdkLogits, 'the graph answers as the model alone would');

    const later = await get(behind);
    assert.equal(later.state, 'CANCELLED');
    assert.equal(later.started, null, 'a job cancelled while QUEUED never ran');
    assert.equal((await get(slow.id)).result, undefined, 'a cancelled job keeps no result');
  });

  test('a failing run is a FAILED job carrying the error code', async () => {
    const job = (await submit('boom', { inputs: [] })).json as Job;
    const done = await until(job.id, ['SUCCEEDED', 'FAILED']);
    assert.equal(done.state, 'FAILED');
    assert.equal(done.error?.code, 'TROUPE_ERR_FN_FAILED');
    assert.match(done.error!.message, /boom went the fn/);
    assert.equal(done.result, undefined);
  });

  test('bad job requests are refused at once with a JSON error; unknown jobs are 404', async () => {
    assertError(await submit('nope', { inputs: [xInput] }), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /no deployment or graph named 'nope'/);
    assertError(
      await call(cluster.url, 'POST', '/api/v1/deployments/mlp/jobs', { body: '{"inputs": [', headers: JSON_HEADERS }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /the job request is not valid JSON/,
    );
    assertError(await submit('mlp', { inputs: [{ ...xInput, shape: [2, 63] }] }), 400, 'TROUPE_ERR_BAD_TENSOR', /input 'x'/);
    assertError(
      await submit('mlp', { inputs: [{ name: 'x', shape: [1, 8], datatype: 'FP32', data: new Array(8).fill(0) }] }),
      400,
      'TROUPE_ERR_BAD_INPUT',
      /input 'x': expected float32\[N,64\], got float32\[1,8\]/,
    );
    assertError(
      await submit('mlp', { inputs: [xInput], parameters: { binary_data_output: true } }),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /a job keeps its result as JSON/,
    );
    assertError(await call(cluster.url, 'GET', '/api/v1/jobs/not-a-job'), 404, 'TROUPE_ERR_UNKNOWN_JOB', /no job 'not-a-job'/);
    assertError(await call(cluster.url, 'DELETE', '/api/v1/jobs/not-a-job'), 404, 'TROUPE_ERR_UNKNOWN_JOB', /no job 'not-a-job'/);
    assert.equal((await call(cluster.url, 'GET', '/v2/health/live')).status, 200, 'the head keeps serving');
  });

  test('a finished job can be deleted, and is dropped by itself after its retention time', async () => {
    const first = (await submit('mlp', { inputs: [xInput] })).json as Job;
    await until(first.id, ['SUCCEEDED']);
    const deleted = await call(cluster.url, 'DELETE', `/api/v1/jobs/${first.id}`);
    assert.equal((deleted.json as Job).state, 'SUCCEEDED');
    assertError(await call(cluster.url, 'GET', `/api/v1/jobs/${first.id}`), 404, 'TROUPE_ERR_UNKNOWN_JOB', /no job/);

    const second = (await submit('mlp', { inputs: [xInput] })).json as Job;
    await until(second.id, ['SUCCEEDED']);
    await waitFor(
      'the finished job to be dropped after --job-ttl-s',
      async () => (await call(cluster.url, 'GET', `/api/v1/jobs/${second.id}`)).status === 404,
      30_000,
      250,
    );
  });

  test('the job endpoints are in the OpenAPI description', async () => {
    const doc = (await call(cluster.url, 'GET', '/docs')).json as { paths: Record<string, Record<string, unknown>> };
    assert.ok(doc.paths['/api/v1/deployments/{name}/jobs']?.post);
    assert.ok(doc.paths['/api/v1/jobs/{id}']?.get);
    assert.ok(doc.paths['/api/v1/jobs/{id}']?.delete);
  });
});
