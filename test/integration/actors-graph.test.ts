import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, method, model, pipeline, tensor } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const CLASSES = 'test/fixtures/classes.js';

describe('class methods as graph steps', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let scaler: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    scaler = await client.actor({ name: 'scaler', module: CLASSES, export: 'Scaler', args: [0.5], cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('methods run as steps next to a model (scale -> model -> argmax), with the instance keeping its state across runs', async () => {
    const view = await client.deploy(
      pipeline('scaled', [
        method('prep', 'scaler', 'scale'),
        model('member13', { path: 'member13.onnx', threads: 1, cpus: 0.1 }),
        method('pick', 'scaler', 'argmax'),
      ]),
    );
    // The signatures the class declares type the graph, as a model's metadata does.
    assert.deepEqual(view.inputs, [{ name: 'x', dtype: 'float32', shape: ['N', 64] }]);
    assert.deepEqual(view.outputs, [{ name: 'label', dtype: 'int64', shape: ['N'] }]);
    const x = tensor('float32', [3, 64], seededFloats(192, 5));
    const local = await runInProcess(join(cluster.modelDir, 'member13.onnx'), {
      x: tensor(
        'float32',
        [3, 64],
        (x.data as Float32Array).map((v) => v * 0.5),
      ),
    });
    const logits = local.logits!.data as Float32Array;
    const expected = [0, 1, 2].map((r) => {
      const row = Array.from(logits.subarray(r * 10, r * 10 + 10));
      return BigInt(row.indexOf(Math.max(...row)));
    });
    const before = await scaler.call<number>('rowsSeen');
    const { label } = await client.run('scaled', { x });
    assert.deepEqual(Array.from(label!.data as BigInt64Array), expected);
    await client.run('scaled', { x });
    assert.equal(await scaler.call('rowsSeen'), before + 6);
    // Inputs that do not fit a method step's declared signature are refused before it runs, as a
    // model step's are: the method would take them, and count their rows.
    await rejectsWith(
      client.run('scaled', { x: tensor('float32', [5, 63], seededFloats(5 * 63, 6)) }),
      'TROUPE_ERR_BAD_INPUT',
      /^step 'scaled > prep': input 'x': expected float32\[N,64\], got float32\[5,63\]$/,
    );
    await rejectsWith(client.run('scaled', { y: x, z: x }), 'TROUPE_ERR_BAD_INPUT', /step 'scaled > prep': .*'y'/);
    assert.equal(await scaler.call('rowsSeen'), before + 6);
  });

  test('deploy-time checks: a missing method, a type that does not fit, an actor that is not a class, a bare method graph', async () => {
    await rejectsWith(
      client.deploy(pipeline('nomethod', [method('p', 'scaler', 'tokenize'), model('member13')])),
      'TROUPE_ERR_BAD_SPEC',
      /class actor 'scaler' has no method 'tokenize' \(its methods: argmax, passThrough, rowsSeen, scale\)/,
    );
    await rejectsWith(
      client.deploy(pipeline('misfit', [model('member13'), method('p', 'scaler', 'scale')])),
      'TROUPE_ERR_BAD_SPEC',
      /step 'p' input 'x' expects float32\[N,64\], but gets 'logits' float32\[N,10\] from step 'member13'/,
    );
    await rejectsWith(
      client.deploy(pipeline('notclass', [method('p', 'member13', 'scale')])),
      'TROUPE_ERR_BAD_SPEC',
      /method step 'p' calls 'member13.scale\(\)', but 'member13' is not a deployed class actor/,
    );
    await rejectsWith(
      client.deploy(method('alone', 'scaler', 'scale')),
      'TROUPE_ERR_BAD_SPEC',
      /is a single method step; put it in a pipeline/,
    );
  });

  test('a method without a declared signature takes whatever it is given, and a class actor a graph calls is not deleted', async () => {
    await client.deploy(pipeline('passing', [method('through', 'scaler', 'passThrough'), model('member13')]));
    const x = tensor('float32', [1, 64], seededFloats(64, 9));
    const local = await runInProcess(join(cluster.modelDir, 'member13.onnx'), { x });
    assert.deepEqual(
      Array.from((await client.run('passing', { x })).logits!.data as Float32Array),
      Array.from(local.logits!.data as Float32Array),
    );
    await rejectsWith(client.undeploy('scaler'), 'TROUPE_ERR_DEPLOYMENT_IN_USE', /passing/);
  });
});
