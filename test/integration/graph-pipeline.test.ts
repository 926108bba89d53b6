import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, fn, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster, GraphDocument } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('graphs: pipelines', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('three models chained positionally equal the same chain run in-process', async () => {
    const chain = pipeline('chain', [
      model('link21', { path: 'link21.onnx', threads: 1 }),
      model('link22', { path: 'link22.onnx', threads: 1 }),
      model('member11', { path: 'member11.onnx', threads: 1 }),
    ]);
    const view = await client.deploy(chain);
    assert.deepEqual(view.graphs, ['chain']);
    assert.equal(view.steps, 3);
    assert.deepEqual(view.inputs, [{ name: 'x', dtype: 'float32', shape: ['N', 64] }]);
    assert.deepEqual(view.outputs, [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }]);
    assert.deepEqual(
      view.deployments.map((d) => [d.name, d.state]),
      [
        ['link21', 'READY'],
        ['link22', 'READY'],
        ['member11', 'READY'],
      ],
    );

    const x = tensor('float32', [5, 64], seededFloats(5 * 64, 3));
    const served = await client.run('chain', { x });
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const b = await runInProcess(join(cluster.modelDir, 'link22.onnx'), { x: a.logits! });
    const c = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x: b.logits! });
    assert.deepEqual(Object.keys(served), ['logits']);
    assert.deepEqual(served.logits!.shape, [5, 10]);
    assert.deepEqual(floats(served.logits), floats(c.logits));
  });

  test('a fn step before a model: outputs feed inputs by name', async () => {
    await client.deploy(pipeline('doubled', [fn('double', `${FNS}#double`), model('member12', { path: 'member12.onnx', threads: 1 })]));
    const x = tensor('float32', [2, 64], seededFloats(128, 4));
    const served = await client.run('doubled', { x });
    const local = await runInProcess(join(cluster.modelDir, 'member12.onnx'), {
      x: tensor(
        'float32',
        [2, 64],
        (x.data as Float32Array).map((v) => v * 2),
      ),
    });
    assert.deepEqual(floats(served.logits), floats(local.logits));
  });

  test('an explicit map wires differently named tensors; a caller input name need not match', async () => {
    const graph = pipeline('adder', [fn('pair', `${FNS}#pair`), model('add', { path: 'add.onnx' })], {
      map: [
        { step: 'add', from: 'p', to: 'a' },
        { step: 'add', from: 'q', to: 'b' },
      ],
    });
    await client.deploy(graph);
    const x = tensor('float32', [1, 64], seededFloats(64, 5));
    const { sum } = await client.run('adder', { x });
    assert.deepEqual(
      floats(sum),
      [...(x.data as Float32Array)].map((v) => Math.fround(v + Math.fround(v * 2))),
    );
  });

  test('the JSON form deploys the same graph, and a single caller input feeds a single-input first step', async () => {
    const doc: GraphDocument = {
      graph: 'json-chain',
      nodes: [
        { kind: 'model', name: 'link21' },
        { kind: 'model', name: 'member11' },
        { kind: 'pipeline', name: 'json-chain', steps: ['link21', 'member11'] },
      ],
    };
    const view = await client.deploy(JSON.parse(JSON.stringify(doc)) as GraphDocument);
    assert.equal(view.kind, 'pipeline');
    const x = tensor('float32', [1, 64], seededFloats(64, 6));
    const served = await client.run('json-chain', { input: x });
    const a = await runInProcess(join(cluster.modelDir, 'link21.onnx'), { x });
    const b = await runInProcess(join(cluster.modelDir, 'member11.onnx'), { x: a.logits! });
    assert.deepEqual(floats(served.logits), floats(b.logits));
    const described = await client.describe();
    assert.ok(
      described.graphs?.some((g) => g.name === 'json-chain' && g.kind === 'pipeline' && g.deployments.join() === 'link21,member11'),
    );
  });

  test('deploy refuses a step input that nothing produces, naming the step and tensor', async () => {
    await rejectsWith(
      client.deploy(pipeline('orphan', [model('member11'), model('add', { path: 'add.onnx' })])),
      'TROUPE_ERR_BAD_SPEC',
      /pipeline 'orphan' step 'add' needs input 'a' float32\[N,64\], which nothing produces: step 'member11' gives 'logits' float32\[N,10\]/,
    );
  });

  test('deploy refuses a dtype/shape mismatch between connected tensors', async () => {
    await client.deploy({ name: 'cnn', model: 'cnn.onnx', threads: 1 });
    await rejectsWith(
      client.deploy(pipeline('mismatch', [model('cnn'), model('link22')])),
      'TROUPE_ERR_BAD_SPEC',
      /pipeline 'mismatch' step 'link22' input 'x' expects float32\[N,64\], but gets 'logits' float32\[N,10\] from step 'cnn'/,
    );
    const described = await client.describe();
    assert.ok(!described.graphs?.some((g) => g.name === 'mismatch'), 'a refused graph is not registered');
  });

  test('deploy refuses unknown models, cycles and graphs past the size limit', async () => {
    await rejectsWith(
      client.deploy(pipeline('ghost', [model('nope')])),
      'TROUPE_ERR_BAD_SPEC',
      /model 'nope' has no model path and no model of that name is deployed/,
    );
    await rejectsWith(
      client.deploy({ graph: 'g', nodes: [{ kind: 'pipeline', name: 'g', steps: ['link21', 'missing'] }] }),
      'TROUPE_ERR_BAD_SPEC',
      /pipeline 'g' names 'missing', which is neither a node of this graph nor a deployed model or fn/,
    );
    await rejectsWith(
      client.deploy({
        graph: 'a',
        nodes: [
          { kind: 'pipeline', name: 'a', steps: ['link21', 'b'] },
          { kind: 'pipeline', name: 'b', steps: ['a'] },
        ],
      }),
      'TROUPE_ERR_BAD_SPEC',
      /graph has a cycle: a > b > a/,
    );
    const wide = { kind: 'pipeline' as const, name: 'wide', steps: Array.from({ length: 200 }, () => 'link21') };
    await rejectsWith(
      client.deploy({
        graph: 'huge',
        nodes: [wide, { kind: 'pipeline', name: 'huge', steps: ['wide', 'wide', 'wide', 'wide', 'wide', 'wide'] }],
      }),
      'TROUPE_ERR_BAD_SPEC',
      /graph 'huge' expands to 1200 model and fn calls per run; the limit is 1024/,
    );
    await rejectsWith(
      client.deploy({ graph: 'bad', nodes: [{ kind: 'pipeline', name: 'bad', steps: [] }] }),
      'TROUPE_ERR_BAD_SPEC',
      /invalid graph: nodes\.0\.steps/,
    );
  });

  test('errors at run time carry the failing step and its code; undeploy forgets the graph', async () => {
    await client.deploy(pipeline('fails', [model('link21'), fn('boom', `${FNS}#boom`), model('member11')]));
    await rejectsWith(
      client.run('fails', { x: tensor('float32', [1, 64], seededFloats(64, 1)) }),
      'TROUPE_ERR_FN_FAILED',
      /^step 'fails > boom': fn 'boom' threw: boom went the fn/,
    );
    await rejectsWith(
      client.run('chain', { x: tensor('float32', [1, 32], new Float32Array(32)) }),
      'TROUPE_ERR_BAD_INPUT',
      /^step 'chain > link21': input 'x': expected float32\[N,64\], got float32\[1,32\]/,
    );
    await client.undeploy('fails');
    await rejectsWith(
      client.run('fails', { x: tensor('float32', [1, 64], seededFloats(64, 1)) }),
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /no deployment named 'fails'/,
    );
  });
});
