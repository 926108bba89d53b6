import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, model, pipeline } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call } from '../helpers/http.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const JSON_HEADERS = { 'content-type': 'application/json' };

type Pending = { actor: string; state: string; reason: string | null; node: string | null };
type Waiting = DeploymentView & { spec: Record<string, unknown>; pending?: Pending[]; message?: string };

function troupe(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { timeout: 60_000, env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

/**
 * One node named `small` with one CPU and no GPU (nvidia-smi pointed at nothing, so a GPU host
 * makes no difference): replicas asking for 2 CPUs or half a GPU can never be placed on it.
 * Every bound in these tests is short (1 s); every request is still capped well above it, so a
 * head that ignored the bound fails the test instead of hanging it.
 */
describe('bounded deploys answer with each actor not READY and why', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const put = (name: string, spec: object, query: string) =>
    call(cluster.url, 'PUT', `/api/v1/deployments/${name}${query}`, {
      body: JSON.stringify(spec),
      headers: JSON_HEADERS,
      timeoutMs: 30_000,
    });
  const remove = async (name: string) => assert.equal((await call(cluster.url, 'DELETE', `/api/v1/deployments/${name}`)).status, 200);

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'small', '--cpus', '1', '--nvidia-smi', '/nonexistent/nvidia-smi']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("HTTP: replicas wider than the node get 202 after ?timeoutS, each PENDING with the scheduler's reason; the deployment stays", async () => {
    const answer = await put('wide', { model: 'mlp.onnx', replicas: 2, cpus: 2, threads: 1 }, '?timeoutS=1');
    assert.equal(answer.status, 202, answer.body.toString());
    const view = answer.json as Waiting;
    assert.equal(view.state, 'DEPLOYING');
    assert.deepEqual(view.actors.map((a) => [a.name, a.state]).sort(), [
      ['wide#0', 'PENDING'],
      ['wide#1', 'PENDING'],
    ]);
    for (const a of view.actors) assert.match(a.reason ?? '', /^needs 2 CPUs; small has 1 of 1 CPUs free$/);
    assert.deepEqual(view.pending?.map((p) => [p.actor, p.state, p.reason]).sort(), [
      ['wide#0', 'PENDING', 'needs 2 CPUs; small has 1 of 1 CPUs free'],
      ['wide#1', 'PENDING', 'needs 2 CPUs; small has 1 of 1 CPUs free'],
    ]);
    assert.match(
      view.message ?? '',
      /^deployment 'wide': 0 of 2 replicas READY after 1 s; wide#\d, wide#\d PENDING \(needs 2 CPUs; small has 1 of 1 CPUs free\); it stays deployed/,
    );

    // Not undone: it is still there, still trying; the older ?timeout name bounds the wait too.
    const still = (await call(cluster.url, 'GET', '/api/v1/deployments/wide')).json as Waiting;
    assert.deepEqual(
      still.actors.map((a) => a.state),
      ['PENDING', 'PENDING'],
    );
    const again = await put('wide', { model: 'mlp.onnx', replicas: 2, cpus: 2, threads: 1 }, '?timeout=0.5');
    assert.equal(again.status, 202, again.body.toString());
    assert.match((again.json as Waiting).message ?? '', /after 0\.5 s; wide#\d, wide#\d PENDING \(needs 2 CPUs/);
    await remove('wide');
  });

  test('HTTP: half a GPU on a node without one, and one replica of two placed', async () => {
    const half = await put('half', { model: 'mlp.onnx', gpus: 0.5, threads: 1 }, '?timeoutS=1');
    assert.equal(half.status, 202, half.body.toString());
    const view = half.json as Waiting;
    assert.equal(view.actors[0]?.state, 'PENDING');
    assert.equal(view.actors[0]?.reason, 'needs 0.5 GPUs and 1 CPU; small has no GPU');
    assert.match(
      view.message ?? '',
      /^deployment 'half': 0 of 1 replicas READY after 1 s; half#0 PENDING \(needs 0\.5 GPUs and 1 CPU; small has no GPU\)/,
    );
    await remove('half');

    // The one CPU fits one replica: it becomes READY (a generous bound), the second cannot follow.
    assert.equal((await put('pair', { model: 'mlp.onnx', threads: 1 }, '?timeoutS=120')).status, 201);
    const pair = await put('pair', { model: 'mlp.onnx', replicas: 2, threads: 1 }, '?timeoutS=1');
    assert.equal(pair.status, 202, pair.body.toString());
    const both = pair.json as Waiting;
    assert.deepEqual(
      both.actors.map((a) => [a.name, a.state]),
      [
        ['pair#0', 'READY'],
        ['pair#1', 'PENDING'],
      ],
    );
    assert.deepEqual(
      both.pending?.map((p) => p.actor),
      ['pair#1'],
    );
    assert.match(
      both.message ?? '',
      /^deployment 'pair': 1 of 2 replicas READY after 1 s; pair#1 PENDING \(needs 1 CPU; small has 0 of 1 CPUs free\)/,
    );
    await remove('pair');
  });

  test('HTTP: a bad ?timeoutS is a 400 before anything is deployed', async () => {
    const spec = { model: 'mlp.onnx', threads: 1 };
    for (const query of [
      '?timeoutS=0',
      '?timeoutS=-1',
      '?timeoutS=abc',
      '?timeoutS=',
      '?timeoutS=3601',
      '?timeoutS=1e3',
      '?timeout=0',
      '?timeoutS=1&timeout=1',
      '?timeoutS=1&timeoutS=2',
    ]) {
      const answer = await put('bad', spec, query);
      assertError(answer, 400, 'TROUPE_ERR_BAD_REQUEST', /\?timeoutS|\?timeout /);
    }
    assert.equal((await call(cluster.url, 'GET', '/api/v1/deployments/bad')).status, 404, 'nothing was deployed');
  });

  test('SDK: deploy rejects with TROUPE_ERR_DEPLOY_TIMEOUT naming every PENDING actor and why; a graph likewise', async () => {
    await assert.rejects(
      client.deploy({ name: 'sdk-wide', model: 'mlp.onnx', replicas: 2, cpus: 2, threads: 1 }, { timeoutMs: 1000 }),
      (err: unknown) => {
        assert.ok(err instanceof TroupeError, String(err));
        assert.equal(err.code, 'TROUPE_ERR_DEPLOY_TIMEOUT', err.message);
        assert.equal(err.retryable, true);
        assert.match(
          err.message,
          /^deployment 'sdk-wide': 0 of 2 replicas READY after 1 s; sdk-wide#\d, sdk-wide#\d PENDING \(needs 2 CPUs; small has 1 of 1 CPUs free\); it stays deployed/,
        );
        return true;
      },
    );
    const kept = (await client.describe()).deployments.find((d) => d.name === 'sdk-wide');
    assert.deepEqual(
      kept?.actors.map((a) => a.state),
      ['PENDING', 'PENDING'],
      'the deployment stays',
    );
    await client.undeploy('sdk-wide');

    await assert.rejects(
      client.deploy(pipeline('gpu-graph', [model('gpu-step', { path: 'mlp.onnx', gpus: 0.5, threads: 1 })]), { timeoutMs: 1000 }),
      (err: unknown) => {
        assert.ok(err instanceof TroupeError, String(err));
        assert.equal(err.code, 'TROUPE_ERR_DEPLOY_TIMEOUT', err.message);
        assert.match(
          err.message,
          /^graph 'gpu-graph' is not READY after 1 s: 'gpu-step' 0 of 1 replicas READY; gpu-step#0 PENDING \(needs 0\.5 GPUs and 1 CPU; small has no GPU\)/,
        );
        return true;
      },
    );
    await client.undeploy('gpu-step');

    await assert.rejects(
      client.deploy({ name: 'never', model: 'mlp.onnx' }, { timeoutMs: 0 }),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_FLAG',
    );
  });

  test('CLI: troupe deploy --timeout-s prints each actor not READY and why, and exits 1', async () => {
    const file = join(cluster.modelDir, 'cli-wide.yaml');
    await writeFile(file, 'name: cli-wide\nmodel: mlp.onnx\nreplicas: 2\ncpus: 2\nthreads: 1\n');
    const out = await troupe(['deploy', file, '--head', cluster.url, '--timeout-s', '1']);
    assert.equal(out.code, 1, `${out.stdout}\n${out.stderr}`);
    assert.match(out.stdout, /^ {2}cli-wide#0 PENDING: needs 2 CPUs; small has 1 of 1 CPUs free$/m);
    assert.match(out.stdout, /^ {2}cli-wide#1 PENDING: needs 2 CPUs; small has 1 of 1 CPUs free$/m);
    assert.match(
      out.stderr,
      /TROUPE_ERR_DEPLOY_TIMEOUT: deployment 'cli-wide': 0 of 2 replicas READY after 1 s; cli-wide#\d, cli-wide#\d PENDING \(needs 2 CPUs; small has 1 of 1 CPUs free\); it stays deployed/,
    );
    await remove('cli-wide');

    for (const [args, message] of [
      [['--timeout-s', '0'], /--timeout-s: must be seconds above 0/],
      [['--timeout-s', 'soon'], /--timeout-s: /],
      [['--timeout-s', '5', '--timeout', '5'], /give --timeout-s or its older name --timeout, not both/],
    ] as const) {
      const bad = await troupe(['deploy', file, '--head', cluster.url, ...args]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /TROUPE_ERR_BAD_FLAG/);
      assert.match(bad.stderr, message);
    }
  });
});
