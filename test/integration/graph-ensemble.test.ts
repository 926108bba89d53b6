import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, ensemble, fn, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const SEEDS = [11, 12, 13];

describe('graphs: parallel ensembles', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const x = tensor('float32', [6, 64], seededFloats(6 * 64, 42));
  let local: number[][]; // each member's logits, in-process

  const members = () => SEEDS.map((s) => model(`member${s}`, { path: `member${s}.onnx`, threads: 1 }));

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    local = [];
    for (const s of SEEDS) local.push(floats((await runInProcess(join(cluster.modelDir, `member${s}.onnx`), { x })).logits));
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  // References computed here, independently of runtime/graph/combiners.ts.
  const meanOf = (weights: number[]) =>
    local[0]!.map((_, k) => Math.fround(local.reduce((sum, m, i) => sum + weights[i]! * m[k]!, 0) / weights.reduce((a, b) => a + b, 0)));

  test('mean equals the mean of the members run in-process; members run on their own actors', async () => {
    const view = await client.deploy(ensemble('avg', members(), { combine: 'mean' }));
    assert.equal(view.kind, 'ensemble');
    assert.deepEqual(view.outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }]);
    const pids = new Set(view.deployments.map((d) => d.actors[0]!.pid));
    assert.equal(pids.size, 3, 'three actor processes');
    const out = await client.run('avg', { x });
    assert.deepEqual(out.logits!.shape, [6, 10]);
    assert.deepEqual(floats(out.logits), meanOf([1, 1, 1]));
  });

  test('weighted mean, max, majority vote and concat', async () => {
    await client.deploy(ensemble('weighted', members(), { combine: { mean: [0.5, 0.3, 0.2] } }));
    assert.deepEqual(floats((await client.run('weighted', { x })).logits), meanOf([0.5, 0.3, 0.2]));

    await client.deploy(ensemble('maxed', members(), { combine: 'max' }));
    assert.deepEqual(
      floats((await client.run('maxed', { x })).logits),
      local[0]!.map((_, k) => Math.max(...local.map((m) => m[k]!))),
    );

    await client.deploy(ensemble('voted', members(), { combine: 'vote' }));
    const voted = (await client.run('voted', { x })).logits!;
    assert.equal(voted.dtype, 'int64');
    assert.deepEqual(voted.shape, [6]);
    const argmax = (m: number[], r: number) => m.slice(r * 10, r * 10 + 10).reduce((best, v, c, row) => (v > row[best]! ? c : best), 0);
    const expected = Array.from({ length: 6 }, (_, r) => {
      const counts = new Array<number>(10).fill(0);
      for (const m of local) counts[argmax(m, r)]!++;
      return counts.reduce((best, n, c) => (n > counts[best]! ? c : best), 0);
    });
    assert.deepEqual([...(voted.data as BigInt64Array)].map(Number), expected);

    await client.deploy(ensemble('joined', members(), { combine: { concat: 1 } }));
    const joined = (await client.run('joined', { x })).logits!;
    assert.deepEqual(joined.shape, [6, 30]);
    const rows = Array.from({ length: 6 }, (_, r) => local.flatMap((m) => m.slice(r * 10, r * 10 + 10)));
    assert.deepEqual(floats(joined), rows.flat());
  });

  test('a user fn combines the members (outputs named <member>/<output>)', async () => {
    await client.deploy(ensemble('custom', members(), { combine: fn('averageLogits', `${FNS}#averageLogits`) }));
    const out = await client.run('custom', { x }, { trace: true });
    const expected = local[0]!.map((_, k) => Math.fround((local[0]![k]! + local[1]![k]! + local[2]![k]!) / 3));
    assert.deepEqual(floats(out.logits), expected);
  });

  test('nesting: an ensemble as a pipeline step, and a trace with one entry per step', async () => {
    const graph = pipeline('nested', [
      model('link21', { path: 'link21.onnx', threads: 1 }),
      ensemble('inner', members(), { combine: 'mean' }),
    ]);
    const view = await client.deploy(graph);
    assert.deepEqual(view.graphs.sort(), ['inner', 'nested']);
    const future = client.run('nested', { x }, { trace: true });
    const out = await future;
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const inner: number[][] = [];
    for (const s of SEEDS) inner.push(floats((await runInProcess(join(cluster.modelDir, `member${s}.onnx`), { x: a.logits! })).logits));
    assert.deepEqual(
      floats(out.logits),
      inner[0]!.map((_, k) => Math.fround((inner[0]![k]! + inner[1]![k]! + inner[2]![k]!) / 3)),
    );
    const trace = (await future.trace())!;
    const steps = trace.map((t) => t.step).sort();
    assert.deepEqual(steps, [
      'nested',
      'nested > inner',
      'nested > inner > combine',
      'nested > inner > member11',
      'nested > inner > member12',
      'nested > inner > member13',
      'nested > link21',
    ]);
    for (const t of trace) assert.ok(t.wallMs >= 0 && t.startMs >= 0, JSON.stringify(t));
    const leaf = trace.find((t) => t.step === 'nested > link21')!;
    assert.equal(leaf.kind, 'model');
    assert.ok(leaf.computeMs !== undefined && leaf.queueMs !== undefined && leaf.transferMs !== undefined, 'model steps split wall time');
    // The inner ensemble is itself runnable.
    const direct = await client.run('inner', { x });
    assert.deepEqual(floats(direct.logits), meanOf([1, 1, 1]));
  });

  test('deploy refuses members whose outputs cannot be combined', async () => {
    await client.deploy({ name: 'link22', model: 'link22.onnx', threads: 1 });
    await rejectsWith(
      client.deploy(ensemble('odd', [model('member11'), model('link22')], { combine: 'mean' })),
      'TROUPE_ERR_BAD_SPEC',
      /ensemble 'odd' cannot mean output 'logits': member 'link22' gives float32\[N,64\] but member 'member11' gives float32\[N,10\]/,
    );
    await rejectsWith(
      client.deploy(ensemble('weights', [model('member11'), model('member12')], { combine: { mean: [1] } })),
      'TROUPE_ERR_BAD_SPEC',
      /ensemble 'weights' has 2 members but 1 weights/,
    );
  });

  test('a failing member fails the run with its step and code', async () => {
    await client.deploy(ensemble('broken', [model('member11'), fn('boom', `${FNS}#boom`)], { combine: 'mean' }));
    await rejectsWith(client.run('broken', { x }), 'TROUPE_ERR_FN_FAILED', /^step 'broken > boom': fn 'boom' threw/);
  });
});
