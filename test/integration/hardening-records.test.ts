import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startHead } from '../../head/index.js';
import { connect, fn } from '../../runtime/internal.js';
import type { Cluster, ClusterView, DeploymentView } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';
import { assertError, call } from '../helpers/http.js';

const JSON_HEADERS = { 'content-type': 'application/json' };
const BINARY = { 'content-type': 'application/octet-stream' };

type Detail = DeploymentView & { spec: Record<string, unknown> };

const MLP_BODY = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.25) }] });

/** Inferences on `deployment` one after another until stopped: how many answered, and the failures by status. */
function callLoop(base: string, deployment: string): { stop: () => Promise<{ ok: number; failed: Record<string, number> }> } {
  let running = true;
  let ok = 0;
  const failed: Record<string, number> = {};
  const loop = (async () => {
    while (running) {
      const answer = await call(base, 'POST', `/v2/models/${deployment}/infer`, { body: MLP_BODY, headers: JSON_HEADERS });
      if (answer.status === 200) ok++;
      else failed[answer.status] = (failed[answer.status] ?? 0) + 1;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { ok, failed };
    },
  };
}

describe("records: a 4xx changes nothing, readiness is the server's, models can be deleted", { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const put = (name: string, spec: unknown) =>
    call(cluster.url, 'PUT', `/api/v1/deployments/${name}`, { body: JSON.stringify(spec), headers: JSON_HEADERS });
  const names = async () =>
    ((await call(cluster.url, 'GET', '/api/v1/deployments')).json as { deployments: Detail[] }).deployments.map((d) => d.name).sort();
  const saved = async () =>
    (
      JSON.parse(await readFile(join(cluster.dataDir, 'state.json'), 'utf8')) as {
        deployments: { name: string; model: string; replicas: number }[];
      }
    ).deployments;
  const get = async (name: string) => (await call(cluster.url, 'GET', `/api/v1/deployments/${name}`)).json as Detail;
  const assertServerReady = async (why: string) => {
    assert.equal((await call(cluster.url, 'GET', '/v2/health/ready')).status, 200, why);
    assert.equal((await call(cluster.url, 'GET', '/readyz')).status, 200, why);
  };

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    // Named .onnx, but onnxruntime cannot load it: only an actor trying finds out.
    await writeFile(join(cluster.modelDir, 'broken.onnx'), 'this is not an onnx model');
    assert.equal((await put('mlp', { model: 'mlp.onnx', threads: 1 })).status, 201);
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a refused deploy (bad path, unloadable file, bad fn reference) leaves no record, not even after a head restart', async () => {
    assertError(
      await put('esc', { model: '../../etc/passwd' }),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /outside the agent's model directory.*; deployment 'esc' was not created$/,
    );
    assertError(
      await put('broken', { model: 'broken.onnx', threads: 1 }),
      422,
      'TROUPE_ERR_MODEL_LOAD',
      /; deployment 'broken' was not created$/,
    );
    assertError(
      await put('noexport', { kind: 'fn', model: `${FNS}#missing` }),
      422,
      'TROUPE_ERR_MODEL_LOAD',
      /is not an exported function.*; deployment 'noexport' was not created$/,
    );
    // Garbage refused at upload is never a model name, so deploying it is a path that is not there.
    assertError(
      await call(cluster.url, 'PUT', '/api/v1/models/junk', { body: 'not onnx', headers: BINARY }),
      422,
      'TROUPE_ERR_BAD_MODEL_FILE',
      /not an ONNX model/,
    );
    assertError(await put('junk', { model: 'junk' }), 400, 'TROUPE_ERR_MODEL_PATH', /not found/);
    // The SDK's deploys, of a model and of a fn (a one-step graph), go through the same controller.
    await rejectsWith(
      client.deploy({ name: 'sdk-broken', model: 'broken.onnx', threads: 1 }),
      'TROUPE_ERR_MODEL_LOAD',
      /; deployment 'sdk-broken' was not created$/,
    );
    await rejectsWith(
      client.deploy(fn('fn-escape', '../../etc/passwd.js#x')),
      'TROUPE_ERR_MODEL_PATH',
      /deployment 'fn-escape' was not created/,
    );

    assert.deepEqual(await names(), ['mlp'], 'GET /api/v1/deployments is unchanged');
    assert.deepEqual(
      (await client.describe()).deployments.map((d) => d.name),
      ['mlp'],
    );
    // The refusal is answered only once the state file no longer holds what was refused.
    assert.deepEqual(
      (await saved()).map((d) => d.name),
      ['mlp'],
      'nothing refused is in the state file',
    );
    await assertServerReady('refused deploys do not touch readiness');

    await cluster.restartHead('SIGKILL');
    await waitFor('mlp to be READY after the restart', async () => (await get('mlp')).state === 'READY', 30_000);
    // The actor may rejoin before its agent does; the server is ready once a node is ALIVE again.
    await waitFor(
      'the agent to rejoin',
      async () => ((await call(cluster.url, 'GET', '/api/v1/cluster')).json as ClusterView).nodes.some((n) => n.state === 'ALIVE'),
      30_000,
    );
    assert.deepEqual(await names(), ['mlp'], 'nothing refused comes back with the restarted head');
    await assertServerReady('after the restart');
  });

  test('a refused update changes nothing: the replica that served serves on, and calls in a loop meanwhile all succeed', async () => {
    const before = await get('mlp');
    const load = callLoop(cluster.url, 'mlp');
    const refused = await put('mlp', { model: 'broken.onnx', threads: 1 });
    const seen = await load.stop();
    assertError(refused, 422, 'TROUPE_ERR_MODEL_LOAD', /; deployment 'mlp' keeps its previous spec \(1 replica\(s\) of mlp\.onnx\)$/);
    console.log(`calls during the refused update: ${seen.ok} answered, failures ${JSON.stringify(seen.failed)}`);
    assert.deepEqual(seen.failed, {}, 'no call failed during the refused update');
    const after = await get('mlp');
    assert.equal(after.spec.model, 'mlp.onnx', 'the previous spec at once');
    assert.equal(after.state, 'READY');
    assert.deepEqual(
      after.actors.map((a) => [a.id, a.pid, a.state]),
      before.actors.map((a) => [a.id, a.pid, 'READY']),
      'the same actor process, untouched',
    );
    assert.deepEqual(
      (await saved()).map((d) => [d.name, d.model]),
      [['mlp', 'mlp.onnx']],
    );

    // A valid update of a one-replica deployment surges: the new replica is READY before the old one drains.
    const surge = callLoop(cluster.url, 'mlp');
    const updated = await put('mlp', { model: 'mlp.onnx', threads: 2 });
    const during = await surge.stop();
    assert.equal(updated.status, 200, updated.body.toString());
    console.log(`calls during the valid update: ${during.ok} answered, failures ${JSON.stringify(during.failed)}`);
    assert.deepEqual(during.failed, {}, 'no call failed during the update');
    const replaced = await get('mlp');
    assert.equal(replaced.actors.length, 1);
    assert.notEqual(replaced.actors[0]!.id, before.actors[0]!.id, 'a new replica runs the new spec');
    assert.equal((await put('mlp', { model: 'mlp.onnx', threads: 1 })).status, 200);

    // A scale-up whose new replica cannot load (its file went away) keeps the replica that runs.
    await copyFile(cluster.models.mlp, join(cluster.modelDir, 'copy.onnx'));
    const first = (await put('copy', { model: 'copy.onnx', threads: 1 })).json as Detail;
    await unlink(join(cluster.modelDir, 'copy.onnx'));
    const scaled = await put('copy', { model: 'copy.onnx', threads: 1, replicas: 2 });
    assertError(
      scaled,
      400,
      'TROUPE_ERR_MODEL_PATH',
      /not found.*; deployment 'copy' keeps its previous spec \(1 replica\(s\) of copy\.onnx\)$/,
    );
    const kept = await get('copy');
    assert.equal(kept.replicas, 1);
    assert.equal(kept.state, 'READY');
    assert.deepEqual(
      kept.actors.map((a) => [a.id, a.pid, a.state]),
      first.actors.map((a) => [a.id, a.pid, 'READY']),
      'the same actor process, untouched',
    );
    assert.deepEqual((await saved()).find((d) => d.name === 'copy')?.replicas, 1);
    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/copy')).status, 200);
  });

  test('server readiness does not wait for any one model; each model says its own', async () => {
    // One GPU on a node with none: PENDING for as long as the test needs.
    const pending = await call(cluster.url, 'PUT', '/api/v1/deployments/gpu?wait=false', {
      body: JSON.stringify({ model: 'mlp.onnx', gpus: 1 }),
      headers: JSON_HEADERS,
    });
    assert.equal(pending.status, 202, pending.body.toString());
    try {
      assert.equal((await call(cluster.url, 'GET', '/v2/models/gpu/ready')).status, 400);
      await assertServerReady('one model that cannot be placed');
      const ready = await call(cluster.url, 'GET', '/v2/health/ready');
      assert.equal((ready.json as { ready: boolean }).ready, true, 'the ready answer says so in its body too');
    } finally {
      assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/gpu')).status, 200);
    }
  });

  test('status page assets are looked up as own names only: __proto__ and friends are 404 with a JSON error', async () => {
    for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
      assertError(
        await call(cluster.url, 'GET', `/status/assets/${name}`),
        404,
        'TROUPE_ERR_NOT_FOUND',
        new RegExp(`no status page asset '${name}'`),
      );
    }
    assert.equal((await call(cluster.url, 'GET', '/status/assets/style.css')).status, 200);
    // A name past what the file system takes is no asset either, and the answer names no path of the server's.
    for (const name of [`app/${'a'.repeat(300)}.js`, `app/${'b'.repeat(60)}.js`]) {
      const answer = await call(cluster.url, 'GET', `/status/assets/${name}`);
      assert.equal(answer.status, 404, answer.body.toString().slice(0, 300));
      assert.ok(!answer.body.toString().includes(process.cwd()), 'no server path in the answer');
    }
  });

  test('DELETE /api/v1/models/{name}: refused while a deployment uses it; blobs nothing refers to leave the disk', async () => {
    const [mlp, cnn] = await Promise.all([readFile(cluster.models.mlp), readFile(cluster.models.cnn)]);
    const upload = async (name: string, bytes: Buffer) => {
      const answer = await call(cluster.url, 'PUT', `/api/v1/models/${name}`, { body: bytes, headers: BINARY });
      assert.ok(answer.status === 200 || answer.status === 201, answer.body.toString());
      return (answer.json as { sha256: string }).sha256;
    };
    const blob = (sha: string) => join(cluster.dataDir, 'models', 'blobs', `${sha}.onnx`);
    const onDisk = (sha: string) =>
      stat(blob(sha)).then(
        () => true,
        () => false,
      );

    const mlpSha = await upload('m1', mlp);
    assert.equal((await put('uses-m1', { model: 'm1', threads: 1 })).status, 201);
    assertError(
      await call(cluster.url, 'DELETE', '/api/v1/models/m1'),
      409,
      'TROUPE_ERR_MODEL_IN_USE',
      /model 'm1' is used by deployment\(s\) 'uses-m1'/,
    );
    // A new upload under the name: the deployment still runs the old bytes, so they stay and are served.
    const cnnSha = await upload('m1', cnn);
    assert.ok(await onDisk(mlpSha), 'the blob a deployment runs stays');
    assert.equal((await call(cluster.url, 'GET', `/api/v1/blobs/${mlpSha}`)).status, 200, 'and agents can still fetch it');
    assertError(await call(cluster.url, 'DELETE', '/api/v1/models/m1'), 409, 'TROUPE_ERR_MODEL_IN_USE', /'uses-m1'/);

    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/uses-m1')).status, 200);
    const deleted = await call(cluster.url, 'DELETE', '/api/v1/models/m1');
    assert.equal(deleted.status, 200, deleted.body.toString());
    assert.deepEqual(deleted.json, { name: 'm1', sha256: cnnSha, deleted: true });
    assert.equal(await onDisk(cnnSha), false, "the deleted model's blob is gone");
    assert.equal(await onDisk(mlpSha), false, 'so is the one only the removed deployment used');
    assertError(await call(cluster.url, 'GET', '/api/v1/models/m1'), 404, 'TROUPE_ERR_UNKNOWN_MODEL', /no uploaded model named 'm1'/);

    // Re-uploading a name with other bytes removes the old ones when nothing else uses them;
    // bytes two names share stay until neither does.
    const first = await upload('m2', mlp);
    await upload('m2', cnn);
    assert.equal(await onDisk(first), false, 'replaced bytes nothing uses are removed');
    await upload('m3', cnn);
    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/models/m2')).status, 200);
    assert.ok(await onDisk(cnnSha), 'm3 still has these bytes');
    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/models/m3')).status, 200);
    assert.equal(await onDisk(cnnSha), false);

    assertError(
      await call(cluster.url, 'DELETE', '/api/v1/models/nope'),
      404,
      'TROUPE_ERR_UNKNOWN_MODEL',
      /no uploaded model named 'nope'/,
    );
    assertError(await call(cluster.url, 'DELETE', '/api/v1/models/..%2Fx'), 400, 'TROUPE_ERR_MODEL_PATH', /could escape/);
    const doc = (await call(cluster.url, 'GET', '/docs')).json as { paths: Record<string, Record<string, unknown>> };
    assert.ok(doc.paths['/api/v1/models/{name}']?.delete, 'the route is in the OpenAPI description');
  });
});

describe('readiness: /readyz and /v2/health/ready agree, and say why not', { timeout: 60_000 }, () => {
  test('no node alive, then a draining head: both not ready, with the reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-ready-'));
    const head = await startHead({ port: 0, dataDir: dir, drainMs: 2000, httpWorkers: 0 });
    try {
      const both = async () => [await call(head.url, 'GET', '/v2/health/ready'), await call(head.url, 'GET', '/readyz')] as const;
      const [oip, probe] = await both();
      assert.equal(oip.status, 400);
      assert.deepEqual(oip.json, { status: 'not ready', ready: false, nodes: 0, reason: 'no node is ALIVE (0 known)' });
      assert.equal(probe.status, 503);
      assert.deepEqual(probe.json, { status: 'not ready', ready: false, nodes: 0, reason: 'no node is ALIVE (0 known)' });

      // A deploy that waits (no node will come) holds the drain open while we ask.
      const waiting = call(head.url, 'PUT', '/api/v1/deployments/waits', { body: '{"model": "mlp.onnx"}', headers: JSON_HEADERS });
      await waitFor('the deploy to be accepted', () => head.state.deployments.has('waits'), 5000);
      const closing = head.close();
      const [oipDraining, probeDraining] = await both();
      assert.equal(oipDraining.status, 400);
      assert.match((oipDraining.json as { reason: string }).reason, /shutting down/);
      assert.equal(probeDraining.status, 503);
      assert.equal((probeDraining.json as { reason: string }).reason, (oipDraining.json as { reason: string }).reason);
      await waiting;
      await closing;
    } finally {
      await head.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
