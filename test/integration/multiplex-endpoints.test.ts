import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildMlp } from '../../models/index.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, TroupeError } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';
import { call } from '../helpers/http.js';
import { StreamReader } from '../helpers/status-stream.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

/**
 * The models of a multiplexed set as models of their own, `{deployment}:{model}`, over HTTP, gRPC
 * and the SDK (issue 42, items 2 and 4): readiness ("can be served now or after a load"),
 * metadata read from the file without loading it, configuration, statistics per model, the
 * repository index with each model's state, load (pinned) and unload per model, and a live
 * directory: files added, changed and removed while the replicas serve.
 */

const x = seededFloats(64, 11);
const input = () => ({ x: tensor('float32', [1, 64], x) });
const JSON_HEADERS = { 'content-type': 'application/json' };
const inferBody = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] });

interface IndexEntry {
  name: string;
  version: string;
  state: string;
  reason: string;
}
interface Stat {
  name: string;
  inference_count: number;
  execution_count: number;
  inference_stats: { success: { count: number }; fail: { count: number } };
}

describe('multiplexed deployments: each model of the set answers as a model', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let grpc: GrpcClient;
  let dir = '';
  const wanted = new Map<string, Float32Array>();

  const writeModel = async (name: string, seed: number) => {
    const path = join(dir, `${name}.onnx`);
    await writeFile(path, buildMlp({ seed, hidden: [16] }).bytes);
    wanted.set(name, (await runInProcess(path, input())).logits!.data as Float32Array);
  };
  const assertAnswer = (name: string, logits: ArrayLike<number>) => {
    const w = wanted.get(name)!;
    for (let i = 0; i < w.length; i++) assert.ok(Math.abs(logits[i]! - w[i]!) < 1e-5, `${name}: logit ${i} is ${logits[i]}, want ${w[i]}`);
  };
  const infer = (name: string) => call(cluster.url, 'POST', `/v2/models/${name}/infer`, { body: inferBody, headers: JSON_HEADERS });
  const index = async () => (await call(cluster.url, 'POST', '/v2/repository/index')).json as IndexEntry[];
  const entry = async (name: string) => (await index()).find((e) => e.name === name);
  const status = async (path: string) => (await call(cluster.url, 'GET', path)).status;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    dir = join(cluster.modelDir, 'tenants');
    await mkdir(dir);
    for (let i = 0; i < 4; i++) await writeModel(`t${i}`, 500 + i);
    await writeFile(join(dir, 'bad.onnx'), randomBytes(2048));
    client = await connect(cluster.url);
    grpc = grpcClient(cluster.grpcAddress);
    await client.deploy({
      name: 'tenants',
      model: 'tenants',
      replicas: 2,
      cpus: 0.5,
      threads: 1,
      batch: { maxSize: 1 },
      multiplex: { maxModels: 2, pollIntervalMs: 200 },
    });
  });
  after(async () => {
    grpc?.close();
    await client?.close();
    await cluster?.stop();
  });

  test('readiness, metadata and configuration of a model of the set, over HTTP and gRPC, without loading it', async () => {
    // The deployment itself answers: it has no one signature.
    const whole = await call(cluster.url, 'GET', '/v2/models/tenants');
    assert.equal(whole.status, 200, whole.body.toString());
    assert.deepEqual(whole.json, { name: 'tenants', versions: ['1'], platform: 'onnx_onnxv1', inputs: [], outputs: [] });

    assert.equal(await status('/v2/models/tenants:t0/ready'), 200);
    assert.equal(await status('/v2/models/tenants:t0/versions/1/ready'), 200);
    assert.equal(await status('/v2/models/tenants:nope/ready'), 404);
    assert.equal(await status('/v2/models/tenants:t0/versions/2/ready'), 404);
    assert.deepEqual(await grpc.call('ModelReady', { name: 'tenants:t0' }), { ready: true });
    assert.deepEqual(await grpc.call('ModelReady', { name: 'tenants:nope' }), { ready: false });

    const meta = await call(cluster.url, 'GET', '/v2/models/tenants:t0');
    assert.equal(meta.status, 200, meta.body.toString());
    assert.deepEqual(meta.json, {
      name: 'tenants:t0',
      versions: ['1'],
      platform: 'onnx_onnxv1',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }],
      outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 10] }],
    });
    const grpcMeta = await grpc.call<{ name: string; inputs: { name: string; datatype: string; shape: string[] }[] }>('ModelMetadata', {
      name: 'tenants:t0',
    });
    assert.equal(grpcMeta.name, 'tenants:t0');
    assert.deepEqual(grpcMeta.inputs, [{ name: 'x', datatype: 'FP32', shape: ['-1', '64'] }]);

    const config = await call(cluster.url, 'GET', '/v2/models/tenants:t1/config');
    assert.equal(config.status, 200, config.body.toString());
    const c = config.json as { name: string; input: { name: string; dims: number[] }[]; output: { name: string }[] };
    assert.equal(c.name, 'tenants:t1');
    assert.deepEqual(
      c.input.map((t) => [t.name, t.dims]),
      [['x', [-1, 64]]],
    );
    assert.equal(c.output[0]!.name, 'logits');
    const grpcConfig = await grpc.call<{ config: { name: string } }>('ModelConfig', { name: 'tenants:t1' });
    assert.equal(grpcConfig.config.name, 'tenants:t1');

    // Described from the files: nothing was loaded for it.
    for (const name of ['tenants:t0', 'tenants:t1']) assert.equal((await entry(name))?.state, 'AVAILABLE', name);

    // An unknown model is a 404 naming what was asked for, never a path; so is a model of a deployment that has one.
    const unknown = await call(cluster.url, 'GET', '/v2/models/tenants:nope');
    assert.equal(unknown.status, 404);
    assert.equal((unknown.json as { code: string }).code, 'TROUPE_ERR_UNKNOWN_MODEL');
    assert.ok(!unknown.body.toString().includes(cluster.modelDir), unknown.body.toString());
    assert.equal((await call(cluster.url, 'GET', '/v2/models/tenants:nope/config')).status, 404);
    assert.equal((await call(cluster.url, 'GET', '/v2/models/tenants:nope/stats')).status, 404);
    assert.equal((await call(cluster.url, 'POST', '/v2/repository/models/tenants:nope/load')).status, 404);
    assert.equal((await call(cluster.url, 'GET', `/v2/models/tenants:${'y'.repeat(300)}/ready`)).status, 404);
  });

  test('inference by name over HTTP, gRPC and the SDK; statistics per model; a bad model not ready, UNAVAILABLE with why', async () => {
    const http = await infer('tenants:t0');
    assert.equal(http.status, 200, http.body.toString());
    assertAnswer('t0', (http.json as { outputs: { data: number[] }[] }).outputs[0]!.data);
    const answer = await grpc.call<{ model_name: string; raw_output_contents: Buffer[] }>('ModelInfer', {
      model_name: 'tenants:t0',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64] }],
      raw_input_contents: [rawFloats(x)],
    });
    assert.equal(answer.model_name, 'tenants:t0');
    assertAnswer('t0', floatsOfRaw(answer.raw_output_contents[0]!));
    assertAnswer('t1', (await client.run('tenants:t1', input())).logits!.data as Float32Array);
    assertAnswer('t0', (await client.run('tenants:t0', input())).logits!.data as Float32Array);
    assert.throws(
      () => client.run('tenants:t0', input(), { model: 't1' }),
      (err: TroupeError) => err.code === 'TROUPE_ERR_BAD_REQUEST',
    );

    // Statistics of t0 alone: its 3 calls (HTTP, gRPC, SDK), over HTTP and gRPC.
    const stats = await waitFor(
      "t0's statistics to count its calls",
      async () => {
        const s = (await call(cluster.url, 'GET', '/v2/models/tenants:t0/stats')).json as { model_stats: Stat[] };
        return s.model_stats[0]!.inference_stats.success.count >= 3 ? s.model_stats[0]! : undefined;
      },
      30_000,
    );
    assert.equal(stats.name, 'tenants:t0');
    assert.equal(stats.inference_stats.success.count, 3);
    assert.equal(stats.inference_count, 3);
    assert.equal(stats.execution_count, 3);
    // t1's call may have run on the other replica, whose report comes in its own second.
    const grpcStats = await waitFor(
      "t1's statistics over gRPC",
      async () => {
        const g = await grpc.call<{ model_stats: { name: string; inference_count: string }[] }>('ModelStatistics', { name: 'tenants:t1' });
        return g.model_stats[0]!.inference_count === '1' ? g : undefined;
      },
      30_000,
    );
    assert.equal(grpcStats.model_stats[0]!.name, 'tenants:t1');
    const idle = (await call(cluster.url, 'GET', '/v2/models/tenants:t3/stats')).json as { model_stats: Stat[] };
    assert.equal(idle.model_stats[0]!.inference_count, 0, 'a model never called has empty statistics');

    const loaded = await entry('tenants:t0');
    assert.equal(loaded?.state, 'LOADED', JSON.stringify(loaded));
    assert.match(loaded!.reason, /^loaded on tenants#\d/);

    // The bad model: ready until a load failed (nothing is known before), then not ready and UNAVAILABLE.
    assert.equal(await status('/v2/models/tenants:bad/ready'), 200);
    const refused = await infer('tenants:bad');
    assert.equal(refused.status, 422, refused.body.toString());
    await waitFor(
      'the bad model to be not ready',
      async () => ((await status('/v2/models/tenants:bad/ready')) === 400 ? true : undefined),
      30_000,
    );
    assert.deepEqual(await grpc.call('ModelReady', { name: 'tenants:bad' }), { ready: false });
    const bad = await entry('tenants:bad');
    assert.equal(bad?.state, 'UNAVAILABLE', JSON.stringify(bad));
    assert.match(bad!.reason, /model 'bad' of deployment 'tenants' did not load: .*retried/);
    assert.ok(!bad!.reason.includes(cluster.modelDir), bad!.reason);
    const readyOnly = (await call(cluster.url, 'POST', '/v2/repository/index', { body: '{"ready":true}', headers: JSON_HEADERS }))
      .json as IndexEntry[];
    assert.ok(!readyOnly.some((e) => e.name === 'tenants:bad'));
    assert.ok(readyOnly.some((e) => e.name === 'tenants:t3' && e.state === 'AVAILABLE'));
    const grpcIndex = await grpc.call<{ models: IndexEntry[] }>('RepositoryIndex', {});
    assert.equal(grpcIndex.models.find((e) => e.name === 'tenants:bad')?.state, 'UNAVAILABLE');
  });

  test('load pins one model in a replica (never evicted by other models) until unload', async () => {
    const load = await call(cluster.url, 'POST', '/v2/repository/models/tenants:t2/load');
    assert.equal(load.status, 200, load.body.toString());
    const pinned = await entry('tenants:t2');
    assert.equal(pinned?.state, 'LOADED', JSON.stringify(pinned));
    assert.match(pinned!.reason, /pinned on tenants#\d/);
    // More models than maxModels through both replicas: t2 stays.
    for (let round = 0; round < 3; round++)
      for (const name of ['t0', 't1', 't3'])
        assertAnswer(name, (await client.run(`tenants:${name}`, input())).logits!.data as Float32Array);
    assert.match((await entry('tenants:t2'))!.reason, /pinned on/);
    assert.equal((await call(cluster.url, 'POST', '/v2/repository/models/tenants:t2/unload')).status, 200);
    await waitFor('t2 to be unloaded', async () => ((await entry('tenants:t2'))?.state === 'AVAILABLE' ? true : undefined), 30_000);
    assertAnswer('t2', (await client.run('tenants:t2', input())).logits!.data as Float32Array);
  });

  test('a live directory: a new file serves, a changed one is reloaded on its next call, a removed one is a 404 saying so', async () => {
    assert.equal(await status('/v2/models/tenants:late/ready'), 404);
    await writeModel('late', 900);
    // The index lists the directories again: the new file shows at once.
    assert.equal((await entry('tenants:late'))?.state, 'AVAILABLE');
    assert.equal(await status('/v2/models/tenants:late/ready'), 200);
    assertAnswer('late', (await client.run('tenants:late', input())).logits!.data as Float32Array);

    // t0 is loaded; its file changes: the next calls, once a replica polled, answer from the new file.
    assertAnswer('t0', (await client.run('tenants:t0', input())).logits!.data as Float32Array);
    await writeModel('t0', 901);
    await waitFor(
      't0 to answer from its new file',
      async () => {
        const logits = (await client.run('tenants:t0', input())).logits!.data as Float32Array;
        return Math.abs(logits[0]! - wanted.get('t0')![0]!) < 1e-5 ? true : undefined;
      },
      30_000,
    );
    for (let i = 0; i < 4; i++) assertAnswer('t0', (await client.run('tenants:t0', input())).logits!.data as Float32Array);

    await rm(join(dir, 't1.onnx'));
    await waitFor(
      't1 to be gone',
      async () => {
        const answer = await infer('tenants:t1');
        return answer.status === 404 ? answer : undefined;
      },
      30_000,
    ).then((answer) => {
      const body = answer.json as { code: string; error: string };
      assert.equal(body.code, 'TROUPE_ERR_UNKNOWN_MODEL');
      assert.match(body.error, /model 't1' of deployment 'tenants' was removed from its directory|deployment 'tenants' has no model 't1'/);
    });
    assert.equal(await status('/v2/models/tenants:t1/ready'), 404);
    assert.equal(await entry('tenants:t1'), undefined);
  });

  test('versions of a multiplexed set: each version a directory, calls split by weight, a version pinned, promoted', async () => {
    // Two directories, one model 'm' each, of different weights.
    for (const [version, seed] of [
      ['a', 700],
      ['b', 701],
    ] as const) {
      await mkdir(join(cluster.modelDir, `sets-${version}`));
      const path = join(cluster.modelDir, `sets-${version}`, 'm.onnx');
      await writeFile(path, buildMlp({ seed, hidden: [16] }).bytes);
      wanted.set(`m@${version}`, (await runInProcess(path, input())).logits!.data as Float32Array);
    }
    const spec = (wa: number) => ({
      name: 'sets',
      replicas: 1,
      cpus: 0.5,
      threads: 1,
      batch: { maxSize: 1 },
      multiplex: { maxModels: 2 },
      versions: [
        { version: 'v1', model: 'sets-a', weight: wa },
        { version: 'v2', model: 'sets-b', weight: 100 - wa },
      ],
    });
    await client.deploy(spec(100));
    const answered = async (path: string) => {
      const a = await call(cluster.url, 'POST', path, { body: inferBody, headers: JSON_HEADERS });
      assert.equal(a.status, 200, a.body.toString());
      return a.json as { model_name: string; model_version: string; outputs: { data: number[] }[] };
    };
    const first = await answered('/v2/models/sets:m/infer');
    assert.deepEqual([first.model_name, first.model_version], ['sets:m', 'v1']);
    assertAnswer('m@a', first.outputs[0]!.data);
    const pinned = await answered('/v2/models/sets:m/versions/v2/infer');
    assert.equal(pinned.model_version, 'v2');
    assertAnswer('m@b', pinned.outputs[0]!.data);
    const future = client.run('sets:m', input());
    assertAnswer('m@a', (await future).logits!.data as Float32Array);
    assert.equal(await future.version(), 'v1');

    // The model's endpoints answer for the set's versions.
    assert.equal(await status('/v2/models/sets:m/ready'), 200);
    assert.equal(await status('/v2/models/sets:m/versions/v2/ready'), 200);
    assert.equal(await status('/v2/models/sets:m/versions/v3/ready'), 404);
    assert.deepEqual((await call(cluster.url, 'GET', '/v2/models/sets:m')).json, {
      name: 'sets:m',
      versions: ['v1', 'v2'],
      platform: 'onnx_onnxv1',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 64] }],
      outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 10] }],
    });
    const stats = await waitFor(
      "sets:m's statistics per version",
      async () => {
        const s = (await call(cluster.url, 'GET', '/v2/models/sets:m/stats')).json as { model_stats: (Stat & { version: string })[] };
        const byVersion = Object.fromEntries(s.model_stats.map((m) => [m.version, m.inference_count]));
        return byVersion.v1 === 2 && byVersion.v2 === 1 ? s : undefined;
      },
      30_000,
    );
    assert.ok(stats.model_stats.every((m) => m.name === 'sets:m'));
    assert.equal((await entry('sets:m'))?.state, 'LOADED');

    // The rollout: the weights move to v2 while the set serves, then v2 is promoted.
    await client.update(spec(0));
    const moved = await answered('/v2/models/sets:m/infer');
    assert.equal(moved.model_version, 'v2');
    assertAnswer('m@b', moved.outputs[0]!.data);
    // What the operator sees (/metrics, the status page's stream): each version's weight, replicas and calls.
    const metrics = (await call(cluster.url, 'GET', '/metrics')).body.toString();
    const sample = (name: string, version: string) =>
      Number(new RegExp(`^${name}\\{model="sets",version="${version}"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN);
    assert.deepEqual(
      ['v1', 'v2'].map((v) => [sample('troupe_version_weight_percent', v), sample('troupe_version_ready_replicas', v)]),
      [
        [0, 1],
        [100, 1],
      ],
    );
    assert.deepEqual(
      ['v1', 'v2'].map((v) => sample('troupe_version_requests_total', v)),
      [2, 2],
    );
    assert.equal(sample('troupe_version_promoted', 'v2'), 0);

    await client.promote('sets', 'v2');
    const promoted = await answered('/v2/models/sets:m/infer');
    assert.equal(promoted.model_version, 'v2');
    assertAnswer('m@b', promoted.outputs[0]!.data);
    assert.match((await call(cluster.url, 'GET', '/metrics')).body.toString(), /^troupe_version_promoted\{model="sets",version="v2"\} 1$/m);
    const page = new StreamReader(cluster.url);
    try {
      const row = await waitFor(
        'the status page to show the promotion',
        async () => {
          const seen = (await page.next()).deployments.find((d) => d.name === 'sets');
          return seen?.promotedFrom ? seen : undefined;
        },
        30_000,
      );
      assert.deepEqual(row.promotedFrom, [
        { version: 'v1', weight: 0 },
        { version: 'v2', weight: 100 },
      ]);
      assert.deepEqual(
        row.versions?.map(({ version, weight, model, replicas, ready, calls }) => ({ version, weight, model, replicas, ready, calls })),
        [{ version: 'v2', weight: 100, model: 'sets-b', replicas: 1, ready: 1, calls: 3 }],
      );
    } finally {
      page.close();
    }
    await client.undeploy('sets');
  });
});
