import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { RunNotStarted } from '../../actors/batcher.js';
import { MainThreadInstance } from '../../actors/main-thread-instance.js';
import { ModelInstances } from '../../actors/model-instances.js';
import { OnnxModel } from '../../actors/onnx-model.js';
import { writeExampleModels } from '../../models/index.js';
import type { ExampleModelPaths } from '../../models/index.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, Tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call } from '../helpers/http.js';
import { seededFloats } from '../helpers/tensors.js';

/**
 * Model instances (`instances` in a deployment, Triton's instance_group count): sessions of one
 * model in one actor, all but one on a thread of its own and the last on the actor's main thread.
 * Real onnxruntime sessions on real threads, and a real cluster whose replica holds two.
 */

const bytes = (t: Tensor | undefined) =>
  Buffer.from((t!.data as Float32Array).buffer, (t!.data as Float32Array).byteOffset, (t!.data as Float32Array).byteLength);

describe('model instances', { timeout: 150_000 }, () => {
  let dir: string;
  let models: ExampleModelPaths;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'troupe-instances-'));
    models = await writeExampleModels(dir);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('two runs sent at once go one to each instance, and each answers what the session in this thread does', async () => {
    const inThread = await OnnxModel.load(models.mlp, { device: 'cpu', threads: 1 });
    const pool = await ModelInstances.load(models.mlp, { device: 'cpu', threads: 1 }, 2);
    try {
      assert.equal(pool.runners, 2);
      assert.deepEqual(pool.metadata, inThread.metadata);
      const inputs = [3, 4].map((seed) => ({ x: tensor('float32', [2, 64], seededFloats(128, seed)) }));
      const runs = inputs.map((x) => pool.run(x));
      assert.deepEqual(pool.pendingRuns, [1, 1], 'the second run went to the idle instance');
      assert.ok(pool.runGoingOn(), 'runs are going on');
      const got = await Promise.all(runs);
      for (const [i, x] of inputs.entries()) {
        const expected = await inThread.run(x);
        assert.ok(bytes(got[i]!.logits).equals(bytes(expected.logits)), `run ${i} differs from the in-process session`);
      }
      assert.deepEqual(pool.pendingRuns, [0, 0]);
      assert.equal(pool.runGoingOn(), undefined);
    } finally {
      await Promise.all([inThread.release(), pool.release()]);
    }
  });

  test("the main thread's instance starts a run in a later turn of the event loop, never inside run()", async () => {
    const session = await OnnxModel.load(models.mlp, { device: 'cpu', threads: 1 });
    let started = 0;
    const instance = new MainThreadInstance({
      metadata: session.metadata,
      run: (inputs, outputs) => (started++, session.run(inputs, outputs)),
      release: () => session.release(),
    });
    try {
      const x = { x: tensor('float32', [1, 64], seededFloats(64, 6)) };
      const ran = instance.run(x);
      for (let i = 0; i < 20; i++) await Promise.resolve();
      assert.equal(started, 0, 'not started by run() nor by the microtasks after it: the batcher sends its other runs first');
      assert.equal(instance.pendingRuns, 1);
      const expected = await session.run(x);
      assert.ok(bytes((await ran).logits).equals(bytes(expected.logits)));
      assert.equal(started, 1);
      assert.equal(instance.pendingRuns, 0);
    } finally {
      await instance.release();
    }
  });

  test("with no instance idle a run waits in the thread's queue, never the main thread's; past its deadline it is not run", async () => {
    const pool = await ModelInstances.load(models.mlp, { device: 'cpu', threads: 1 }, 2);
    try {
      assert.equal(pool.overlap, 3, 'two runs on the thread (one waiting), one on the main thread');
      const x = { x: tensor('float32', [1, 64], seededFloats(64, 5)) };
      const runs = [pool.run(x), pool.run(x), pool.run(x)];
      // The first went to the idle thread, the second to the idle main thread, the third, with
      // none idle, into the thread's queue.
      assert.deepEqual(pool.pendingRuns, [2, 1]);
      assert.equal(pool.idleRunner(), false);
      const [a, b, c] = await Promise.all(runs);
      assert.ok(bytes(a!.logits).equals(bytes(b!.logits)) && bytes(b!.logits).equals(bytes(c!.logits)), 'every instance answers alike');
      assert.deepEqual(pool.pendingRuns, [0, 0]);
      assert.equal(pool.idleRunner(), true);
      // A run whose deadline passes before its turn is not run.
      const onThread = pool.run(x);
      const late = pool.run(x, undefined, performance.timeOrigin + performance.now() - 1);
      await assert.rejects(late, RunNotStarted);
      await onThread;
      assert.equal(pool.runGoingOn(), undefined);
    } finally {
      await pool.release();
    }
  });

  test('with mainThread false (TROUPE_INFERENCE_THREAD=always) every instance is on an inference thread', async () => {
    const pool = await ModelInstances.load(models.mlp, { device: 'cpu', threads: 1 }, 2, undefined, false);
    try {
      assert.equal(pool.overlap, 4, 'two runs on each of two threads');
      const x = { x: tensor('float32', [1, 64], seededFloats(64, 7)) };
      const runs = [pool.run(x), pool.run(x), pool.run(x)];
      assert.deepEqual(pool.pendingRuns, [2, 1], 'one idle thread each, then the queue with the most room');
      await Promise.all(runs);
    } finally {
      await pool.release();
    }
  });

  describe('in a cluster', () => {
    let cluster: TestCluster;
    let client: Cluster;
    before(async () => {
      cluster = await startCluster({ agents: [['--cpus', '4']] });
      client = await connect(cluster.url);
    });
    after(async () => {
      await client?.close();
      await cluster?.stop();
    });

    test("a replica of 2 instances holds two sessions, serves calls, and Triton's config counts its instances", async () => {
      // 16 calls at once in batches of at most 2 rows: more runs than one session holds at a time, so
      // both sessions run; which session takes which run is asserted above, on a pool of its own.
      await client.deploy({ name: 'two', model: 'mlp.onnx', cpus: 2, instances: 2, batch: { maxSize: 2 } });
      // The actor reports the sessions it loaded, not the spec's wish.
      const actor = (await client.describe()).deployments.find((d) => d.name === 'two')!.actors[0]!;
      assert.equal(actor.state, 'READY');
      assert.equal(actor.instances, 2, 'two sessions loaded');
      const reference = await OnnxModel.load(path.join(cluster.modelDir, 'mlp.onnx'), { device: 'cpu', threads: 1 });
      try {
        const xs = Array.from({ length: 16 }, (_, seed) => tensor('float32', [1, 64], seededFloats(64, seed + 5)));
        const answers = await Promise.all(xs.map((x) => client.run('two', { x })));
        for (const [i, x] of xs.entries()) {
          const expected = await reference.run({ x });
          assert.ok(bytes(answers[i]!.logits).equals(bytes(expected.logits)), `call ${i} differs from the in-process session`);
        }
      } finally {
        await reference.release();
      }
      const config = await call(cluster.url, 'GET', '/v2/models/two/config');
      assert.equal(config.status, 200);
      assert.deepEqual(
        (config.json as { instance_group: { count: number; kind: string }[] }).instance_group.map((g) => [g.kind, g.count]),
        [['KIND_CPU', 2]],
      );
    });

    test('instances on anything but a model of one file is refused with the field named', async () => {
      const answer = await call(cluster.url, 'PUT', '/api/v1/deployments/multi', {
        body: JSON.stringify({ name: 'multi', model: 'mlp.onnx', kind: 'fn', instances: 2 }),
        headers: { 'content-type': 'application/json' },
      });
      assertError(answer, 400, 'TROUPE_ERR_BAD_SPEC', /instances: only a model deployment of one ONNX file has instances/);
      const graph = await call(cluster.url, 'PUT', '/api/v1/deployments/graphed', {
        body: JSON.stringify({ name: 'graphed', model: 'chain.graph.json', instances: 2 }),
        headers: { 'content-type': 'application/json' },
      });
      assertError(graph, 400, 'TROUPE_ERR_BAD_SPEC', /instances: .*a graph file runs its sessions in one thread/);
      const tooMany = await call(cluster.url, 'PUT', '/api/v1/deployments/many', {
        body: JSON.stringify({ name: 'many', model: 'mlp.onnx', instances: 17 }),
        headers: { 'content-type': 'application/json' },
      });
      assertError(tooMany, 400, 'TROUPE_ERR_BAD_SPEC', /instances/);
    });
  });
});
