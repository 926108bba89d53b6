import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, GraphDocument, Tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const models = (names: string[]) => names.map((n) => ({ kind: 'model' as const, name: n, model: `${n}.onnx` }));
const CHAIN: GraphDocument = {
  graph: 'chain',
  nodes: [...models(['link21', 'link22', 'member11']), { kind: 'pipeline', name: 'chain', steps: ['link21', 'link22', 'member11'] }],
};
const VOTE: GraphDocument = {
  graph: 'avg',
  nodes: [
    ...models(['member11', 'member12', 'member13']),
    { kind: 'ensemble', name: 'avg', members: ['member11', 'member12', 'member13'], combine: { op: 'mean' } },
  ],
};

describe('graphs served by one actor (*.graph.json)', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  /** What the chain gives for `x`, each model run in this process in turn. */
  const chainInProcess = async (x: Tensor) => {
    let t = x;
    for (const name of ['link21', 'link22', 'member11'])
      t = Object.values(await runInProcess(join(cluster.modelDir, `${name}.onnx`), { x: t }))[0]!;
    return floats(t);
  };

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    await writeFile(join(cluster.modelDir, 'chain.graph.json'), JSON.stringify(CHAIN));
    await writeFile(join(cluster.modelDir, 'avg.graph.json'), JSON.stringify(VOTE));
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a pipeline file runs every step in one process and gives what the models give one after another', async () => {
    const view = await client.deploy({ name: 'chain1', model: 'chain.graph.json', threads: 1 });
    assert.equal(view.actors.length, 1, 'one actor holds the three models');
    const deployed = (await client.describe()).deployments.map((d) => d.name);
    assert.deepEqual(deployed, ['chain1'], 'the steps are not deployments of their own');
    assert.deepEqual(view.metadata, {
      inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }],
      outputs: [{ name: 'logits', dtype: 'float32', shape: ['N', 10] }],
    });
    const x = tensor('float32', [3, 64], seededFloats(3 * 64, 7));
    const out = await client.run('chain1', { x });
    assert.deepEqual(out.logits!.shape, [3, 10]);
    assert.deepEqual(floats(out.logits), await chainInProcess(x));

    // The same answer through the head (HTTP Open Inference Protocol), checked like any model's input.
    const res = await fetch(`${cluster.url}/v2/models/chain1/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [3, 64], datatype: 'FP32', data: [...(x.data as Float32Array)] }] }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { outputs: { name: string; data: number[] }[] };
    assert.deepEqual(body.outputs[0]!.data, floats(out.logits));
    await rejectsWith(
      client.run('chain1', { x: tensor('float32', [1, 32], new Float32Array(32)) }),
      'TROUPE_ERR_BAD_INPUT',
      /input 'x'.*\[N,64\]/,
    );
  });

  test('whole graph runs are batched: concurrent callers each get exactly their own rows', async () => {
    await client.deploy({ name: 'chain8', model: 'chain.graph.json', threads: 1, batch: { maxSize: 8, maxDelayMs: 20 } });
    const inputs = Array.from({ length: 24 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 100 + i)));
    const outs = await Promise.all(inputs.map((x) => client.run('chain8', { x })));
    for (const [i, out] of outs.entries()) assert.deepEqual(floats(out.logits), await chainInProcess(inputs[i]!), `caller ${i}`);
    // The actor reports its totals about once a second.
    const stats = await waitFor('the actor to report the 24 calls', async () => {
      const s = (await client.describe()).deployments.find((d) => d.name === 'chain8')!.actors[0]!.stats;
      return s && s.calls >= 24 ? s : undefined;
    });
    assert.ok(stats.batches < stats.calls, `calls were batched (${stats.calls} calls in ${stats.batches} runs)`);
  });

  test('an ensemble file combines its members in the actor', async () => {
    await client.deploy({ name: 'avg1', model: 'avg.graph.json', threads: 1 });
    const x = tensor('float32', [2, 64], seededFloats(2 * 64, 9));
    const members: number[][] = [];
    for (const s of [11, 12, 13]) members.push(floats((await runInProcess(join(cluster.modelDir, `member${s}.onnx`), { x })).logits));
    const out = await client.run('avg1', { x });
    assert.deepEqual(
      floats(out.logits),
      members[0]!.map((_, k) => Math.fround((members[0]![k]! + members[1]![k]! + members[2]![k]!) / 3)),
    );
  });

  test('an ensemble that joins its members along the rows is never batched', async () => {
    await writeFile(
      join(cluster.modelDir, 'rows.graph.json'),
      JSON.stringify({
        ...VOTE,
        nodes: [
          ...VOTE.nodes.slice(0, 3),
          { kind: 'ensemble', name: 'avg', members: ['member11', 'member12', 'member13'], combine: { op: 'concat', axis: 0 } },
        ],
      }),
    );
    await client.deploy({ name: 'rows', model: 'rows.graph.json', threads: 1, batch: { maxSize: 8, maxDelayMs: 20 } });
    const inputs = Array.from({ length: 6 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 200 + i)));
    const outs = await Promise.all(inputs.map((x) => client.run('rows', { x })));
    for (const [i, out] of outs.entries()) {
      const members: number[] = [];
      for (const s of [11, 12, 13])
        members.push(...floats((await runInProcess(join(cluster.modelDir, `member${s}.onnx`), { x: inputs[i]! })).logits));
      assert.deepEqual(out.logits!.shape, [3, 10]);
      assert.deepEqual(floats(out.logits), members, `caller ${i}`);
    }
    const stats = await waitFor('the actor to report the 6 calls', async () => {
      const s = (await client.describe()).deployments.find((d) => d.name === 'rows')!.actors[0]!.stats;
      return s && s.calls >= 6 ? s : undefined;
    });
    assert.equal(stats.batches, stats.calls, 'one run per call');
  });

  test('a graph file the actor cannot serve fails the deploy and says why', async () => {
    const write = (name: string, doc: unknown) =>
      writeFile(join(cluster.modelDir, name), typeof doc === 'string' ? doc : JSON.stringify(doc));
    await write('fn.graph.json', {
      graph: 'p',
      nodes: [
        ...models(['link21']),
        { kind: 'fn', name: 'f', fn: 'fns.js#double' },
        { kind: 'pipeline', name: 'p', steps: ['link21', 'f'] },
      ],
    });
    await rejectsWith(
      client.deploy({ name: 'withfn', model: 'fn.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /fn\.graph\.json': fn 'f': a graph served by one actor holds model steps only/,
    );
    await write('escape.graph.json', {
      graph: 'p',
      nodes: [
        { kind: 'model', name: 'm', model: '../elsewhere.onnx' },
        { kind: 'pipeline', name: 'p', steps: ['m'] },
      ],
    });
    await rejectsWith(
      client.deploy({ name: 'escape', model: 'escape.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /model 'm': model path '\.\.\/elsewhere\.onnx' is outside the graph file's folder/,
    );
    await write('options.graph.json', {
      graph: 'p',
      nodes: [
        { kind: 'model', name: 'm', model: 'link21.onnx', replicas: 2 },
        { kind: 'pipeline', name: 'p', steps: ['m'] },
      ],
    });
    await rejectsWith(
      client.deploy({ name: 'options', model: 'options.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /model 'm' has deployment options \(replicas\)/,
    );
    await write('broken.graph.json', '{"graph": ');
    await rejectsWith(
      client.deploy({ name: 'broken', model: 'broken.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /broken\.graph\.json': not valid JSON/,
    );
    await write('dangling.graph.json', { graph: 'p', nodes: [{ kind: 'pipeline', name: 'p', steps: ['ghost'] }] });
    await rejectsWith(
      client.deploy({ name: 'dangling', model: 'dangling.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /pipeline 'p' names 'ghost', which is not a node of this graph/,
    );
    await write('mistyped.graph.json', {
      graph: 'p',
      nodes: [...models(['member11', 'link21']), { kind: 'pipeline', name: 'p', steps: ['member11', 'link21'] }],
    });
    await rejectsWith(
      client.deploy({ name: 'mistyped', model: 'mistyped.graph.json' }),
      'TROUPE_ERR_MODEL_LOAD',
      /mistyped\.graph\.json'.*link21/,
    );
  });
});
