import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { callLoad, probeHttp, probeSdk, writeDistinctMlps } from '../helpers/version-probes.js';
import type { ModelAnswers } from '../helpers/version-probes.js';

/**
 * No call lost while a rollout changes (issue 38, item 4): versions added (whose replicas take a
 * while to start), weights changed, a version promoted and the promotion rolled back, with SDK and
 * HTTP callers calling all along. A version takes calls only once it can serve them, and what it
 * joins keeps serving meanwhile; every answer names the version that ran it, and comes from that
 * version's model.
 */
describe('a rollout changed under load', { timeout: 300_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let answers: ModelAnswers;
  /** The model each version runs (fixed for the whole test). */
  const modelOf: Record<string, string> = { v1: 'mlp-0.onnx', v2: 'mlp-1.onnx', v3: 'mlp-2.onnx' };

  const request = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${cluster.url}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const split = (weights: Record<string, number>) => ({
    cpus: 0.25,
    threads: 1,
    versions: Object.entries(weights).map(([version, weight]) => ({ version, model: modelOf[version], weight })),
  });

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    ({ answers } = await writeDistinctMlps(cluster.modelDir, 3));
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  /** Four SDK callers and two HTTP callers, each calling `name` in a loop until stopped; every answer and failure kept. */
  const keepCalling = (name = 'c') => {
    const load = callLoad([
      ...Array.from({ length: 4 }, () => () => probeSdk(client, answers, name)),
      ...Array.from({ length: 2 }, () => () => probeHttp(cluster.url, answers, name)),
    ]);
    return {
      ...load,
      /** Resolves once `n` more calls were answered (bounded). */
      more: (n: number) => {
        const at = load.sent();
        return waitFor(`${n} more calls`, () => load.sent() >= at + n, 60_000);
      },
    };
  };

  test('versions added, weights changed, promote, rollback: no call fails, each answer from the version it names', async () => {
    const put = await request('PUT', '/api/v1/deployments/c', split({ v1: 100 }));
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const load = keepCalling();
    try {
      await load.more(100);
      const steps: [string, () => Promise<{ status: number; body: Record<string, unknown> }>][] = [
        ['v2 added at 10%', () => request('PUT', '/api/v1/deployments/c', split({ v1: 90, v2: 10 }))],
        ['v3 added at 25%', () => request('PUT', '/api/v1/deployments/c', split({ v1: 65, v2: 10, v3: 25 }))],
        ['weights changed', () => request('PUT', '/api/v1/deployments/c', split({ v1: 0, v2: 50, v3: 50 }))],
        ['v3 promoted', () => request('POST', '/api/v1/deployments/c/promote', { version: 'v3' })],
        ['the promotion rolled back', () => request('POST', '/api/v1/deployments/c/rollback')],
      ];
      for (const [what, step] of steps) {
        const answer = await step();
        assert.equal(answer.status, 200, `${what}: ${JSON.stringify(answer.body)}`);
        await load.more(100);
      }
    } finally {
      await load.stop();
    }
    assert.deepEqual(load.failures, [], 'no call fails while the rollout changes');
    for (const p of load.seen) assert.equal(modelOf[p.version ?? ''], p.model, `an answer named ${p.version} but came from ${p.model}`);
    assert.deepEqual([...new Set(load.seen.map((p) => p.version))].sort(), ['v1', 'v2', 'v3']);
    // The rollback brought back the split as it was before the promotion.
    const view = (await client.describe()).deployments.find((d) => d.name === 'c')!;
    assert.deepEqual(
      view.versions?.map((v) => [v.version, v.weight]),
      [
        ['v1', 0],
        ['v2', 50],
        ['v3', 50],
      ],
    );
    const after: Record<string, number> = {};
    for (let i = 0; i < 20; i++) {
      const p = await probeSdk(client, answers, 'c');
      after[p.version!] = (after[p.version!] ?? 0) + 1;
    }
    assert.deepEqual(after, { v2: 10, v3: 10 });
  });

  test('a rollback with nothing to undo is refused saying why, and changes nothing', async () => {
    await request('PUT', '/api/v1/deployments/one', split({ v1: 100 }));
    const refused = await request('POST', '/api/v1/deployments/one/rollback');
    assert.equal(refused.status, 400);
    assert.equal(refused.body.code, 'TROUPE_ERR_BAD_REQUEST');
    assert.match(String(refused.body.error), /runs one version \('v1'\) and no promotion to undo: nothing to roll back/);
    // A second rollback after one that restored the split: the first version takes every call, as before promotions existed.
    const rolled = await request('POST', '/api/v1/deployments/c/rollback');
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    const view = (await client.describe()).deployments.find((d) => d.name === 'c')!;
    assert.deepEqual(
      view.versions?.map((v) => [v.version, v.weight]),
      [['v1', 100]],
    );
  });

  test('a plain deployment split into versions under load, and back: its replicas serve until the versions can, no call fails', async () => {
    const put = (body: unknown) => request('PUT', '/api/v1/deployments/c', body);
    assert.ok((await put({ cpus: 0.25, threads: 1, model: 'mlp-2.onnx' })).status < 300);
    const load = keepCalling();
    try {
      await load.more(100);
      const splitUp = await put(split({ v1: 50, v2: 50 }));
      assert.equal(splitUp.status, 200, JSON.stringify(splitUp.body));
      await load.more(100);
      const plainAgain = await put({ cpus: 0.25, threads: 1, model: 'mlp-2.onnx' });
      assert.equal(plainAgain.status, 200, JSON.stringify(plainAgain.body));
      await load.more(100);
    } finally {
      await load.stop();
    }
    assert.deepEqual(load.failures, [], 'no call fails while the deployment changes shape');
    const allowed = new Set(['1=mlp-2.onnx', 'v1=mlp-0.onnx', 'v2=mlp-1.onnx']);
    for (const p of load.seen) assert.ok(allowed.has(`${p.version === undefined ? '1' : p.version}=${p.model}`), JSON.stringify(p));
    // Back to one model: its own replicas serve, and the versions' deployments are gone.
    await waitFor('c.v1 and c.v2 to stop', async () => !(await client.describe()).deployments.some((d) => d.versionOf === 'c'), 60_000);
  });

  test('every version replaced at once under load: the dropped one serves until the new one can (found by the model-based test)', async () => {
    const put = (body: unknown) => request('PUT', '/api/v1/deployments/r', body);
    assert.ok((await put(split({ v1: 0, v2: 100 }))).status < 300);
    assert.equal((await request('POST', '/api/v1/deployments/r/promote', { version: 'v2' })).status, 200);
    await waitFor('r.v1 to stop', async () => !(await client.describe()).deployments.some((d) => d.name === 'r.v1'), 60_000);
    const load = keepCalling('r');
    try {
      await load.more(50);
      const replaced = await put(split({ v1: 100 }));
      assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
      await load.more(100);
    } finally {
      await load.stop();
    }
    assert.deepEqual(load.failures, [], 'no call fails while v2 gives way to v1');
    for (const p of load.seen) assert.equal(modelOf[p.version ?? ''], p.model, JSON.stringify(p));
    await waitFor('r.v2 to stop once v1 serves', async () => !(await client.describe()).deployments.some((d) => d.name === 'r.v2'), 60_000);
  });

  test('a new version at 100 beside the old at 0, under load: the old serves until the new one can (found by the model-based test)', async () => {
    const put = (body: unknown) => request('PUT', '/api/v1/deployments/z', body);
    assert.ok((await put(split({ v1: 100 }))).status < 300);
    const load = keepCalling('z');
    try {
      await load.more(50);
      const moved = await put(split({ v1: 0, v2: 100 }));
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      await load.more(100);
    } finally {
      await load.stop();
    }
    assert.deepEqual(load.failures, [], 'no call fails while v2 starts with v1 at weight 0');
    for (const p of load.seen) assert.equal(modelOf[p.version ?? ''], p.model, JSON.stringify(p));
    assert.ok(
      load.seen.some((p) => p.version === 'v2'),
      'v2 takes the calls once READY',
    );
    assert.equal((await request('DELETE', '/api/v1/deployments/z')).status, 200);
  });
});
