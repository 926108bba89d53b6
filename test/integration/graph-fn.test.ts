import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, fn, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { isAlive, startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { FNS, GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

describe('fn steps: functions from modules on the agent, each in its own actor process', { timeout: 180_000 }, () => {
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

  test('a fn runs in an actor process of its own; a .ts reference resolves to the compiled .js', async () => {
    const view = await client.deploy(fn('double', 'test/fixtures/fns.ts#double'));
    assert.equal(view.kind, 'fn');
    const actor = view.deployments[0]!.actors[0]!;
    assert.equal(actor.state, 'READY');
    assert.ok(actor.pid && isAlive(actor.pid) && actor.pid !== process.pid);
    const x = tensor('float32', [2, 3], Float32Array.of(1, 2, 3, -4, 0.5, 0));
    const { x: y } = await client.run('double', { x });
    assert.deepEqual(floats(y), [2, 4, 6, -8, 1, 0]);
  });

  test('a fn with a declared signature is type-checked in graphs and its inputs are validated', async () => {
    const view = await client.deploy(
      pipeline('halved', [fn('halve', `${FNS}#halve`), model('member13', { path: 'member13.onnx', threads: 1 })]),
    );
    assert.deepEqual(view.inputs, [{ name: 'x', dtype: 'float32', shape: ['N', 64] }]);
    const x = tensor('float32', [2, 64], seededFloats(128, 8));
    const local = await runInProcess(join(cluster.modelDir, 'member13.onnx'), {
      x: tensor(
        'float32',
        [2, 64],
        (x.data as Float32Array).map((v) => v * 0.5),
      ),
    });
    assert.deepEqual(floats((await client.run('halved', { x })).logits), floats(local.logits));
    await rejectsWith(
      client.run('halve', { x: tensor('float32', [1, 8], new Float32Array(8)) }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x': expected float32\[N,64\], got float32\[1,8\]/,
    );
    await rejectsWith(
      client.deploy(pipeline('halfwrong', [model('member13'), fn('halve')])),
      'TROUPE_ERR_BAD_SPEC',
      /step 'halve' input 'x' expects float32\[N,64\], but gets 'logits' float32\[N,10\] from step 'member13'/,
    );
  });

  test('modules outside the module directory, missing exports and non-functions are refused', async () => {
    await rejectsWith(
      client.deploy(fn('escape', '../../etc/passwd.js#x')),
      'TROUPE_ERR_MODEL_PATH',
      /fn module '..\/..\/etc\/passwd.js' is outside the agent's module directory/,
    );
    await rejectsWith(
      client.deploy(fn('absent', 'test/fixtures/nope.js#x')),
      'TROUPE_ERR_MODEL_PATH',
      /fn module 'test\/fixtures\/nope.js' not found/,
    );
    await rejectsWith(
      client.deploy(fn('noexport', `${FNS}#missing`)),
      'TROUPE_ERR_MODEL_LOAD',
      /fn 'missing' of .*fns\.js is not an exported function \(the module exports .*double/,
    );
    await rejectsWith(client.deploy(fn('number', `${FNS}#notAFunction`)), 'TROUPE_ERR_MODEL_LOAD', /is not an exported function/);
    assert.throws(() => fn('bad', 'no-hash-here'), /fn references are 'path\/to\/module.js#exportName'/);
  });

  test('a fn that throws or returns something other than tensors fails with TROUPE_ERR_FN_FAILED', async () => {
    await client.deploy(fn('boom', `${FNS}#boom`));
    await rejectsWith(client.run('boom', {}), 'TROUPE_ERR_FN_FAILED', /fn 'boom' threw: boom went the fn/);
    await client.deploy(fn('notTensors', `${FNS}#notTensors`));
    await rejectsWith(client.run('notTensors', {}), 'TROUPE_ERR_FN_FAILED', /fn 'notTensors' returned number, not a map of tensors/);
    // The actors survive their fn's failures.
    const { x } = await client.run('double', { x: tensor('float32', [1], Float32Array.of(3)) });
    assert.deepEqual(floats(x), [6]);
  });
});
