import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, ensemble, fn, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import { DIST_ROOT, FNS } from '../helpers/graphs.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * A graph is a model of the Open Inference Protocol like any deployment, whoever deployed it:
 * metadata inferred from its nodes' signatures (platform "ensemble", as Triton names its graphs),
 * readiness, and inference, served by the head itself (--http-workers 0) and by the front-door
 * workers (which run it through their SDK connection, i.e. the head's graph service).
 */

const ROW = [...seededFloats(64, 7)];

function inferBody(rows: number[][]): string {
  return JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [rows.length, 64], data: rows.flat() }] });
}

/** A POST on a connection of its own, so the head hands it to a front-door worker when it has them. */
function postFresh(base: string, path: string, body: string) {
  return nodeCall(base, 'POST', path, { body, headers: { 'content-type': 'application/json' } });
}

async function frontDoorOk(url: string, name: string): Promise<number> {
  const text = (await call(url, 'GET', '/metrics')).body.toString();
  const line = text.split('\n').find((l) => l.startsWith(`troupe_front_door_requests_total{model="${name}",outcome="ok"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

for (const workers of [0, 2]) {
  describe(`a graph over /v2/models/{graph} (--http-workers ${workers})`, { timeout: 180_000 }, () => {
    let cluster: TestCluster;
    let client: Cluster;
    before(async () => {
      cluster = await startCluster({
        headArgs: ['--http-workers', String(workers)],
        agents: [['--name', 'g1', '--cpus', '2', '--module-dir', DIST_ROOT]],
      });
      client = await connect(cluster.url);
    });
    after(async () => {
      await client?.close();
      await cluster?.stop();
    });

    test("a graph deployed through HTTP has metadata, readiness and inference; the answer is the SDK run's", async () => {
      const member = (name: string) => model(name, { path: 'mlp.onnx', cpus: 0.25, threads: 1 });
      const doc = JSON.stringify(ensemble('pair', [member('left'), member('right')], { combine: 'mean' }));
      const put = await call(cluster.url, 'PUT', '/api/v1/deployments/pair', {
        body: doc,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(put.status, 201, JSON.stringify(put.json));

      const meta = await call(cluster.url, 'GET', '/v2/models/pair');
      assert.equal(meta.status, 200, JSON.stringify(meta.json));
      assert.deepEqual(meta.json, {
        name: 'pair',
        versions: ['1'],
        platform: 'ensemble',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }],
        outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 10] }],
      });
      assert.equal((await call(cluster.url, 'GET', '/v2/models/pair/ready')).status, 200);
      // Triton's tools read the configuration first (perf_analyzer, model-analyzer): an ensemble's.
      const config = await call(cluster.url, 'GET', '/v2/models/pair/config');
      assert.equal(config.status, 200, config.body.toString());
      const ensembleConfig = config.json as {
        platform: string;
        max_batch_size: number;
        input: { name: string; data_type: string; dims: number[] }[];
        output: { name: string; data_type: string; dims: number[] }[];
        instance_group: unknown[];
      };
      const tensors = (list: { name: string; data_type: string; dims: number[] }[]) => list.map((t) => [t.name, t.data_type, t.dims]);
      assert.deepEqual(
        [ensembleConfig.platform, ensembleConfig.max_batch_size, ensembleConfig.instance_group],
        ['ensemble', 0, []],
        'an ensemble: no batch axis and no instances of its own',
      );
      assert.deepEqual(tensors(ensembleConfig.input), [['x', 'TYPE_FP32', [-1, 64]]]);
      assert.deepEqual(tensors(ensembleConfig.output), [['logits', 'TYPE_FP32', [-1, 10]]]);
      assert.equal((await call(cluster.url, 'GET', '/v2/models/pair/versions/2/config')).status, 404);
      const index = (await call(cluster.url, 'POST', '/v2/repository/index', { body: '{}' })).json as { name: string; state: string }[];
      assert.deepEqual(
        index.filter((e) => ['left', 'pair', 'right'].includes(e.name)).map((e) => [e.name, e.state]),
        [
          ['left', 'READY'],
          ['pair', 'READY'],
          ['right', 'READY'],
        ],
      );
      const read = (await call(cluster.url, 'GET', '/api/v1/deployments/pair')).json as {
        name: string;
        kind: string;
        deployments: string[];
      };
      assert.deepEqual([read.name, read.kind, read.deployments], ['pair', 'ensemble', ['left', 'right']], 'read where it was written');

      const answer = await postFresh(cluster.url, '/v2/models/pair/infer', inferBody([ROW, ROW]));
      assert.equal(answer.status, 200, answer.body.toString());
      const out = answer.json as { model_name: string; outputs: { name: string; shape: number[]; data: number[] }[] };
      assert.equal(out.model_name, 'pair');
      assert.deepEqual(
        out.outputs.map((o) => [o.name, o.shape]),
        [['logits', [2, 10]]],
      );
      const sdk = await client.run('pair', { x: tensor('float32', [1, 64], Float32Array.from(ROW)) });
      const want = [...(sdk.logits!.data as Float32Array)];
      out.outputs[0]!.data.slice(0, 10).forEach((v, i) => assert.ok(Math.abs(v - want[i]!) < 1e-5, `logit ${i}: ${v} vs ${want[i]}`));
      // Workers report what they answered every 500 ms.
      if (workers > 0)
        await waitFor(
          'a front-door worker to report the graph request it answered',
          async () => (await frontDoorOk(cluster.url, 'pair')) >= 1,
          10_000,
        );

      // Checked against the graph's inferred signature before anything runs, naming the graph.
      const wrong = await postFresh(
        cluster.url,
        '/v2/models/pair/infer',
        JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 64], data: ROW }] }),
      );
      assertError(wrong, 400, 'TROUPE_ERR_BAD_INPUT', /'pair'.*'x'/);

      // The jobs API runs it too.
      const job = await call(cluster.url, 'POST', '/api/v1/deployments/pair/jobs', {
        body: inferBody([ROW]),
        headers: { 'content-type': 'application/json' },
      });
      assert.ok(job.status === 200 || job.status === 202, `${job.status} ${job.body.toString()}`);
    });

    test('a graph with a fn step that declares no signature has no metadata (503 saying why) but runs, its inputs checked by its steps', async () => {
      await client.deploy(
        pipeline('doubled', [fn('double', `${FNS}#double`, { cpus: 0.1 }), model('mlp-h', { path: 'mlp.onnx', cpus: 0.25, threads: 1 })]),
      );
      assertError(
        await call(cluster.url, 'GET', '/v2/models/doubled'),
        503,
        'TROUPE_ERR_NOT_READY',
        /'doubled'.*a fn that declares no signature/,
      );
      assertError(
        await call(cluster.url, 'GET', '/v2/models/doubled/config'),
        503,
        'TROUPE_ERR_NOT_READY',
        /graph 'doubled'.*declares no tensors/,
      );
      const answer = await postFresh(cluster.url, '/v2/models/doubled/infer', inferBody([ROW]));
      assert.equal(answer.status, 200, answer.body.toString());
      const sdk = await client.run('doubled', { x: tensor('float32', [1, 64], Float32Array.from(ROW)) });
      const want = [...(sdk.logits!.data as Float32Array)];
      (answer.json as { outputs: { data: number[] }[] }).outputs[0]!.data.forEach((v, i) =>
        assert.ok(Math.abs(v - want[i]!) < 1e-5, `logit ${i}`),
      );
      // Nothing checks it at the door; the model step after the fn refuses the shape, and the caller hears why.
      const wrong = await postFresh(
        cluster.url,
        '/v2/models/doubled/infer',
        JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 63], data: ROW.slice(1) }] }),
      );
      assertError(wrong, 400, 'TROUPE_ERR_BAD_INPUT', /mlp-h/);
    });

    test('a graph deployed through the SDK is served the same; once deleted it is a 404 like any unknown model', async () => {
      const member = (name: string) => model(name, { path: 'mlp.onnx', cpus: 0.25, threads: 1 });
      await client.deploy(ensemble('sdk-pair', [member('left'), member('right')], { combine: 'mean' }));
      const answer = await postFresh(cluster.url, '/v2/models/sdk-pair/infer', inferBody([ROW]));
      assert.equal(answer.status, 200, answer.body.toString());

      const removed = await call(cluster.url, 'DELETE', '/api/v1/deployments/sdk-pair');
      assert.deepEqual(removed.json, { name: 'sdk-pair', kind: 'graph', deleted: true });
      await waitFor(
        'the deleted graph to answer 404',
        async () => (await postFresh(cluster.url, '/v2/models/sdk-pair/infer', inferBody([ROW]))).status === 404,
        10_000,
      );
      const gone = await postFresh(cluster.url, '/v2/models/sdk-pair/infer', inferBody([ROW]));
      assertError(gone, 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /sdk-pair/);
      assert.equal((await call(cluster.url, 'GET', '/v2/models/sdk-pair/ready')).status, 404);
    });
  });
}
