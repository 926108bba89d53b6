import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MEMBERS, argmaxRows, runEnsemble, writeEnsembleModels } from '../../examples/ensemble/ensemble.js';
import { standardize } from '../../examples/ensemble/steps.js';
import { score, writeScorer } from '../../examples/data-parallel/score.js';
import { shardedGraph, writeShardedModels } from '../../examples/sharded/stages.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, Tensor } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, floats } from '../helpers/graphs.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { childEnv } from '../helpers/env.js';

const run = promisify(execFile);
const example = (name: string) => fileURLToPath(new URL(`../../examples/${name}/main.js`, import.meta.url));

describe('examples: ensemble and data-parallel, checked against onnxruntime in-process', { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('examples/ensemble: every member and the vote equal the same computation in-process', async () => {
    const paths = await writeEnsembleModels(cluster.modelDir);
    const x = tensor(
      'float32',
      [16, 64],
      seededFloats(16 * 64, 5).map((v) => v * 2),
    );
    const { combined, members } = await runEnsemble(client, x);
    const prepared = (await standardize({ x })).x!;
    const votes: number[][] = [];
    for (const name of MEMBERS) {
      const local = await runInProcess(paths[name]!, { x: prepared });
      assert.deepEqual(floats(members[name]), floats(local.logits), name);
      votes.push(argmaxRows(local.logits!));
    }
    const majority = votes[0]!.map((_, r) => {
      const counts = new Map<number, number>();
      for (const v of votes) counts.set(v[r]!, (counts.get(v[r]!) ?? 0) + 1);
      return [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]![0];
    });
    assert.deepEqual(combined, majority);
  });

  test('examples/data-parallel: the chunked scores equal one in-process run over the whole batch', async () => {
    const path = await writeScorer(cluster.modelDir);
    const rows = 3000;
    const x = tensor('float32', [rows, 64], seededFloats(rows * 64, 12));
    const result = await score(client, x, { replicas: 2, chunk: 256 });
    assert.deepEqual(result.scores.shape, [rows, 10]);
    assert.deepEqual(floats(result.scores), floats((await runInProcess(path, { x })).logits));
    assert.ok(result.rowsPerSecond > 0 && result.oneCallRowsPerSecond > 0);
  });
});

describe('examples: sharded, two stages on two simulated GPUs', { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [[...GRAPH_AGENT, '--simulate-gpus', '2']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('each stage is pinned to its own GPU, and the pipeline equals the uncut model in-process', async () => {
    const models = await writeShardedModels(cluster.modelDir);
    const view = await client.deploy(shardedGraph());
    const actors = view.deployments.map((d) => d.actors[0]!);
    assert.deepEqual(
      actors.map((a) => a.gpus.length),
      [1, 1],
    );
    assert.notEqual(actors[0]!.gpus[0], actors[1]!.gpus[0], 'the stages sit on different GPUs');
    assert.deepEqual(actors.map((a) => a.visibleDevices).sort(), ['0', '1']);
    for (const batch of [1, 2]) {
      const image: Tensor = tensor('float32', [batch, 3, 224, 224], seededFloats(batch * 3 * 224 * 224, batch));
      const { logits } = await client.run('sharded', { image });
      const whole = await runInProcess(models.whole, { image });
      assert.deepEqual(logits!.shape, [batch, 1000]);
      assert.deepEqual(floats(logits), floats(whole.logits), `batch ${batch}`);
    }
  });
});

describe('examples run from the command line', { timeout: 240_000 }, () => {
  const opts = { timeout: 120_000, env: childEnv({}, 'error') };

  test('npm run example:ensemble prints each member and the vote', async () => {
    const { stdout } = await run(process.execPath, [example('ensemble')], opts);
    assert.match(stdout, /row {2}truth {2}judge-a {2}judge-b {2}judge-c {2}\| vote/);
    assert.match(stdout, /correct: judge-a \d+\/12, judge-b \d+\/12, judge-c \d+\/12, vote \d+\/12/);
  });

  test('npm run example:data-parallel prints rows/s', async () => {
    const { stdout } = await run(process.execPath, [example('data-parallel'), '4096', '2', '512'], opts);
    assert.match(stdout, /scored 4096 rows in chunks of 512 on 2 replicas/);
    assert.match(stdout, /dataParallel: [\d,]+ rows\/s/);
  });

  test('npm run example:sharded says the output equals the uncut model', async () => {
    const { stdout } = await run(process.execPath, [example('sharded')], opts);
    assert.match(stdout, /stage0: mobilenet-stage0\.onnx on local gpu:\d/);
    assert.match(stdout, /equals the uncut model in-process: yes, every element/);
  });
});
