import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { buildMlp } from '../../models/index.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import { StreamReader } from '../helpers/status-stream.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const x = seededFloats(64, 3);
const input = () => ({ x: tensor('float32', [1, 64], x) });

async function view(client: Cluster, name: string): Promise<DeploymentView | undefined> {
  return (await client.describe()).deployments.find((d) => d.name === name);
}

async function put(url: string, name: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/api/v1/deployments/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A spec of two versions, the first on mlp.onnx and the second on mlp-b.onnx, with these weights. */
function split(first: number, second: number, names: [string, string] = ['v1', 'v2']): Record<string, unknown> {
  return {
    cpus: 0.5,
    threads: 1,
    versions: [
      { version: names[0], model: 'mlp.onnx', weight: first },
      { version: names[1], model: 'mlp-b.onnx', weight: second },
    ],
  };
}

async function post(url: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('versions and traffic splitting', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  /** What each version answers for `x`: the two models differ in their weights. */
  let answers: Record<'v1' | 'v2', number[]>;

  const whichVersion = (logits: ArrayLike<number>): 'v1' | 'v2' => {
    const close = (a: number[]) => a.every((v, i) => Math.abs(v - logits[i]!) < 1e-5);
    if (close(answers.v1)) return 'v1';
    if (close(answers.v2)) return 'v2';
    throw new Error(`an answer from neither version: ${Array.from(logits).join(',')}`);
  };

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    await writeFile(join(cluster.modelDir, 'mlp-b.onnx'), buildMlp({ seed: 7 }).bytes);
    client = await connect(cluster.url);
    answers = {
      v1: Array.from((await runInProcess(cluster.models.mlp, input())).logits!.data as Float32Array),
      v2: Array.from((await runInProcess(join(cluster.modelDir, 'mlp-b.onnx'), input())).logits!.data as Float32Array),
    };
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('1,000 calls split by the weights, each answered by its version, each version its own deployment', async () => {
    const answer = await put(cluster.url, 'ab', split(90, 10));
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    assert.deepEqual(
      (answer.body.versions as { version: string; weight: number; deployment: string; state: string }[]).map((v) => [
        v.version,
        v.weight,
        v.deployment,
        v.state,
      ]),
      [
        ['v1', 90, 'ab.v1', 'READY'],
        ['v2', 10, 'ab.v2', 'READY'],
      ],
    );
    const counts = { v1: 0, v2: 0 };
    for (let i = 0; i < 1000; i += 50) {
      const futures = Array.from({ length: 50 }, () => client.run('ab', input()));
      for (const future of futures) {
        const version = whichVersion((await future).logits!.data as Float32Array);
        // The SDK says which version answered, as HTTP and gRPC do.
        assert.equal(await future.version(), version);
        counts[version]++;
      }
    }
    assert.ok(Math.abs(counts.v1 - 900) <= 50 && Math.abs(counts.v2 - 100) <= 50, JSON.stringify(counts));
    assert.equal((await view(client, 'ab.v1'))?.versionOf, 'ab');
  });

  test('OIP: a version is pinned by its URL, metadata lists the versions, an unknown version is a 404 naming them', async () => {
    const meta = (await (await fetch(`${cluster.url}/v2/models/ab`)).json()) as { name: string; versions: string[] };
    assert.equal(meta.name, 'ab');
    assert.deepEqual(meta.versions, ['v1', 'v2']);
    for (const version of ['v1', 'v2'] as const) {
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${cluster.url}/v2/models/ab/versions/${version}/infer`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] }),
        });
        assert.equal(res.status, 200);
        const body = (await res.json()) as { model_name: string; model_version: string; outputs: { data: number[] }[] };
        assert.equal(whichVersion(body.outputs[0]!.data), version);
        // Answered as asked, as gRPC answers (not as the deployment that runs the version).
        assert.deepEqual([body.model_name, body.model_version], ['ab', version]);
      }
      assert.equal((await fetch(`${cluster.url}/v2/models/ab/versions/${version}/ready`)).status, 200);
    }
    // Not pinned: the split chose the version, and the answer names the one that ran it.
    for (let i = 0; i < 10; i++) {
      const split = await fetch(`${cluster.url}/v2/models/ab/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] }),
      });
      const chosen = (await split.json()) as { model_name: string; model_version: string; outputs: { data: number[] }[] };
      assert.deepEqual([chosen.model_name, chosen.model_version], ['ab', whichVersion(chosen.outputs[0]!.data)]);
    }
    // Statistics by version, under the name asked for (each version's deployment counts its calls; actors report about once a second).
    type Stats = { model_stats: { name: string; version: string; inference_stats: { success: { count: number } } }[] };
    const stats = async (path: string) => (await (await fetch(`${cluster.url}/v2/models/ab${path}/stats`)).json()) as Stats;
    await waitFor(
      'v2 to report its pinned calls',
      async () => ((await stats('/versions/v2')).model_stats[0]?.inference_stats.success.count ?? 0) >= 5,
      20_000,
    );
    assert.deepEqual(
      (await stats('/versions/v2')).model_stats.map((m) => [m.name, m.version]),
      [['ab', 'v2']],
    );
    assert.deepEqual(
      (await stats('')).model_stats.map((m) => [m.name, m.version]),
      [
        ['ab', 'v1'],
        ['ab', 'v2'],
      ],
    );
    const noStats = await fetch(`${cluster.url}/v2/models/ab/versions/v3/stats`);
    assert.equal(noStats.status, 404);
    assert.match(((await noStats.json()) as { error: string }).error, /no version 'v3' \(versions: v1, v2\)/);
    const unknown = await fetch(`${cluster.url}/v2/models/ab/versions/v3/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] }),
    });
    assert.equal(unknown.status, 404);
    assert.match(((await unknown.json()) as { error: string }).error, /no version 'v3' \(versions: v1, v2\)/);
  });

  test('gRPC: model_version pins a version and is echoed', async () => {
    const grpc = grpcClient(cluster.grpcAddress);
    try {
      for (const version of ['v1', 'v2'] as const) {
        const answer = await grpc.call<{ model_name: string; model_version: string; raw_output_contents: Buffer[] }>('ModelInfer', {
          model_name: 'ab',
          model_version: version,
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64] }],
          raw_input_contents: [rawFloats(x)],
        });
        assert.deepEqual([answer.model_name, answer.model_version], ['ab', version]);
        assert.equal(whichVersion(floatsOfRaw(answer.raw_output_contents[0]!)), version);
      }
    } finally {
      grpc.close();
    }
  });

  /** 16 callers calling `ab` in a loop until `stop`, counting answers and keeping every failure. */
  const keepCalling = () => {
    let flowing = true;
    const load = { served: 0, failures: [] as unknown[], stop: async () => {} };
    const loops = Array.from({ length: 16 }, async () => {
      while (flowing) {
        try {
          await client.run('ab', input());
          load.served++;
        } catch (err) {
          load.failures.push(err);
        }
      }
    });
    load.stop = async () => {
      flowing = false;
      await Promise.all(loops);
    };
    return load;
  };

  test('a PUT to 100/0 while calls flow loses none, and then every call goes to the version at 100', async () => {
    const load = keepCalling();
    await waitFor('calls to flow', () => load.served > 200 || undefined, 30_000);
    const answer = await put(cluster.url, 'ab', split(0, 100));
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const at = load.served;
    await waitFor('more calls after the PUT', () => load.served > at + 200 || undefined, 30_000);
    await load.stop();
    assert.deepEqual(load.failures, []);
    for (let i = 0; i < 20; i++) assert.equal(whichVersion((await client.run('ab', input())).logits!.data as Float32Array), 'v2');
    // A version at weight 0 keeps its replicas, ready to take calls again.
    assert.equal((await view(client, 'ab.v1'))?.state, 'READY');
  });

  test('promote under load: one call, the promoted version takes everything, the other stops, no call lost', async () => {
    await put(cluster.url, 'ab', split(50, 50));
    const load = keepCalling();
    await waitFor('calls to flow', () => load.served > 200 || undefined, 30_000);
    const promoted = await post(cluster.url, '/api/v1/deployments/ab/promote', { version: 'v2' });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    await waitFor('ab.v1 to stop', async () => (await view(client, 'ab.v1')) === undefined || undefined, 60_000);
    await load.stop();
    assert.deepEqual(load.failures, []);
    const versions = (await view(client, 'ab'))?.versions;
    assert.deepEqual(
      versions?.map((v) => [v.version, v.weight]),
      [['v2', 100]],
    );
  });

  test('rollback: the first version listed takes every call and the canary stops', async () => {
    await put(cluster.url, 'roll', split(80, 20, ['stable', 'canary']));
    const rolled = await post(cluster.url, '/api/v1/deployments/roll/rollback');
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    await waitFor('roll.canary to stop', async () => (await view(client, 'roll.canary')) === undefined || undefined, 60_000);
    for (let i = 0; i < 10; i++) assert.equal(whichVersion((await client.run('roll', input())).logits!.data as Float32Array), 'v1');
  });

  test('what goes wrong is said: weights that do not sum, a version deleted on its own, versionOf given, promoting a plain deployment', async () => {
    const sum = await put(cluster.url, 'bad', {
      versions: [
        { version: 'a', model: 'mlp.onnx', weight: 60 },
        { version: 'b', model: 'mlp.onnx', weight: 30 },
      ],
    });
    assert.equal(sum.status, 400);
    assert.equal(sum.body.code, 'TROUPE_ERR_BAD_SPEC');
    assert.match(String(sum.body.error), /weights of versions must sum to 100/);
    const twice = await put(cluster.url, 'bad', {
      versions: [
        { version: 'a', model: 'mlp.onnx', weight: 50 },
        { version: 'a', model: 'mlp.onnx', weight: 50 },
      ],
    });
    assert.equal(twice.status, 400);
    assert.match(String(twice.body.error), /each version needs a name of its own/);
    const own = await fetch(`${cluster.url}/api/v1/deployments/roll.stable`, { method: 'DELETE' });
    assert.equal(own.status, 409);
    assert.match(((await own.json()) as { error: string }).error, /'roll.stable' runs a version of 'roll'/);
    const given = await put(cluster.url, 'sneaky', { model: 'mlp.onnx', versionOf: 'roll' });
    assert.equal(given.status, 400);
    assert.match(String(given.body.error), /'versionOf' is set by the head/);
    await client.deploy({ name: 'plain', model: 'mlp.onnx', cpus: 0.5, threads: 1 });
    const plain = await post(cluster.url, '/api/v1/deployments/plain/promote', { version: 'v1' });
    assert.equal(plain.status, 400);
    assert.match(String(plain.body.error), /has no versions to promote or roll back/);
  });

  test('promote and rollback from the SDK and the CLI; a promote with no body names the versions', async () => {
    const weights = (v: DeploymentView) => v.versions?.map((x) => [x.version, x.weight]);
    assert.equal((await put(cluster.url, 'sdk', split(70, 30))).status, 201);
    const empty = await post(cluster.url, '/api/v1/deployments/sdk/promote');
    assert.equal(empty.status, 400);
    assert.match(String(empty.body.error), /name the version that takes every call in the body, \{"version": "v2"\} \(versions: v1, v2\)/);
    assert.deepEqual(weights(await client.promote('sdk', 'v2')), [['v2', 100]]);
    assert.deepEqual(weights(await client.rollback('sdk')), [
      ['v1', 70],
      ['v2', 30],
    ]);
    const troupe = (...args: string[]) =>
      spawnSync(process.execPath, [CLI, ...args, '--head', cluster.url], { encoding: 'utf8', timeout: 60_000, env: childEnv() });
    const promoted = troupe('promote', 'sdk', 'v1');
    assert.equal(promoted.status, 0, promoted.stderr);
    assert.match(promoted.stdout, /^ {2}version v1: 100% of calls, mlp\.onnx, READY \(deployment sdk\.v1\)$/m);
    const rolled = troupe('rollback', 'sdk');
    assert.equal(rolled.status, 0, rolled.stderr);
    assert.match(rolled.stdout, /^ {2}version v1: 70% of calls/m);
    assert.match(rolled.stdout, /^ {2}version v2: 30% of calls/m);
    // No promotion left to undo: the first version takes every call, then there is nothing to roll back.
    assert.equal(troupe('rollback', 'sdk').status, 0);
    const nothing = troupe('rollback', 'sdk');
    assert.notEqual(nothing.status, 0);
    assert.match(nothing.stderr, /TROUPE_ERR_BAD_REQUEST: deployment 'sdk' runs one version \('v1'\) and no promotion to undo/);
    await assert.rejects(client.rollback('sdk'), (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_BAD_REQUEST');
  });

  test("troupe deploy, troupe status and the status page show a split's replicas as its versions'", async () => {
    const file = join(cluster.modelDir, 'split.json');
    await writeFile(
      file,
      JSON.stringify({
        name: 'cli-split',
        cpus: 0.5,
        threads: 1,
        versions: [
          { version: 'a', model: 'mlp.onnx', weight: 75 },
          { version: 'b', model: 'mlp-b.onnx', weight: 25 },
        ],
      }),
    );
    const cli = spawnSync(process.execPath, [CLI, 'deploy', file, '--head', cluster.url], {
      encoding: 'utf8',
      timeout: 60_000,
      env: childEnv(),
    });
    assert.equal(cli.status, 0, cli.stderr);
    // The split runs no replica itself: not "0/1 READY · no actors yet", but its versions' replicas.
    assert.match(
      cli.stdout,
      /^deployment 'cli-split' is READY: cli-split: 2\/2 READY across its versions · a 75% \(cli-split\.a 1\/1 READY\), b 25% \(cli-split\.b 1\/1 READY\)$/m,
    );
    // (Progress lines before it count the versions' replicas as they come up: 0/2, then 2/2.)
    assert.doesNotMatch(cli.stdout, /no actors yet|cli-split: \d+\/1 READY/);
    assert.match(
      cli.stdout,
      /^ {2}version a: 75% of calls, mlp\.onnx, READY \(cli-split\.a: 1\/1 READY · cli-split\.a#0 READY on n1 \(pid \d+\)\)$/m,
    );
    assert.match(
      cli.stdout,
      /^ {2}version b: 25% of calls, mlp-b\.onnx, READY \(cli-split\.b: 1\/1 READY · cli-split\.b#0 READY on n1 \(pid \d+\)\)$/m,
    );
    const status = spawnSync(process.execPath, [CLI, 'status', '--head', cluster.url], {
      encoding: 'utf8',
      timeout: 60_000,
      env: childEnv(),
    });
    assert.equal(status.status, 0, status.stderr);
    assert.match(
      status.stdout,
      /^ {2}cli-split +READY +2\/2 READY {2}split: a 75% \(cli-split\.a 1\/1 READY\), b 25% \(cli-split\.b 1\/1 READY\)$/m,
    );
    const page = new StreamReader(cluster.url);
    try {
      const row = (await page.next()).deployments.find((d) => d.name === 'cli-split')!;
      assert.deepEqual([row.state, row.replicas, row.states], ['READY', 2, { READY: 2 }]);
      assert.deepEqual(
        row.versions?.map(({ version, weight, deployment, model, replicas, ready }) => ({
          version,
          weight,
          deployment,
          model,
          replicas,
          ready,
        })),
        [
          { version: 'a', weight: 75, deployment: 'cli-split.a', model: 'mlp.onnx', replicas: 1, ready: 1 },
          { version: 'b', weight: 25, deployment: 'cli-split.b', model: 'mlp-b.onnx', replicas: 1, ready: 1 },
        ],
      );
    } finally {
      page.close();
    }
  });

  test('deleting a deployment split between versions stops every version', async () => {
    const res = await fetch(`${cluster.url}/api/v1/deployments/roll`, { method: 'DELETE' });
    assert.equal(res.status, 200, await res.text());
    await waitFor('roll and its versions to be gone', async () => {
      const names = (await client.describe()).deployments.map((d) => d.name);
      return !names.some((n) => n === 'roll' || n.startsWith('roll.')) || undefined;
    });
  });
});
