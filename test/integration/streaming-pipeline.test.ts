import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, ensemble, method, model, pipeline, tensor } from '../../runtime/internal.js';
import type { ActorHandle, Cluster, Outputs } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith, writeGraphModels } from '../helpers/graphs.js';
import { STREAM_STEPS, deployByRow } from '../helpers/stream-pipeline.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const STEPS = STREAM_STEPS;

async function labels(items: AsyncIterable<Outputs>): Promise<bigint[]> {
  const out: bigint[] = [];
  for await (const { label } of items) out.push(...(label!.data as BigInt64Array));
  return out;
}

/** Each row's argmax and argmin of a model's logits, computed in this process. */
function extremes(logits: Float32Array, rows: number): { max: bigint[]; min: bigint[] } {
  const max: bigint[] = [];
  const min: bigint[] = [];
  for (let r = 0; r < rows; r++) {
    const row = Array.from(logits.subarray(r * 10, r * 10 + 10));
    max.push(BigInt(row.indexOf(Math.max(...row))));
    min.push(BigInt(row.indexOf(Math.min(...row))));
  }
  return { max, min };
}

describe('streams through a pipeline: generator method steps pass each item on as it comes', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let rows: ActorHandle;
  // The plain method steps after a stream run on another actor: a stream holds its instance.
  const x = tensor('float32', [5, 64], seededFloats(5 * 64, 7));
  let expected: { max: bigint[]; min: bigint[] };

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    rows = await deployByRow(client);
    const local = await runInProcess(join(cluster.modelDir, 'member13.onnx'), { x });
    expected = extremes(local.logits!.data as Float32Array, 5);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('generator -> model -> method: one item per row, in order, as in-process onnxruntime computes them', async () => {
    assert.deepEqual(await labels(client.stream('by-row', { x })), expected.max);
    // A window of 1: the run never gets ahead of the reader, and the answer is the same.
    assert.deepEqual(await labels(client.stream('by-row', { x }, { window: 1 })), expected.max);
    // A streaming graph is read as a stream; run() says so.
    await rejectsWith(client.run('by-row', { x }), 'TROUPE_ERR_BAD_REQUEST', /graph 'by-row' streams .*cluster\.stream\(\)/);
    // A generator step's inputs are checked against its declared signature before it starts:
    // [1,192] would have been read as one row of 64 and the rest dropped.
    await rejectsWith(
      labels(client.stream('by-row', { x: tensor('float32', [1, 192], seededFloats(192, 8)) })),
      'TROUPE_ERR_BAD_INPUT',
      /^step 'by-row > \w+': input 'x': expected float32\[N,64\], got float32\[1,192\]$/,
    );
  });

  test('a generator as a later step runs per item and its items are flattened in order', async () => {
    await client.actor({ name: 'last', module: STEPS, export: 'RowStream', cpus: 0.1 });
    await client.deploy(
      pipeline('by-row-both', [
        method('split', 'rows', 'rows'),
        model('member13'),
        method('twice', 'after', 'both'),
        method('pick', 'last', 'label'),
      ]),
    );
    const want = expected.max.flatMap((m, r) => [m, expected.min[r]!]);
    assert.deepEqual(await labels(client.stream('by-row-both', { x })), want);
  });

  test('a graph that does not stream, and a single model, give one item: the answer', async () => {
    await client.deploy(pipeline('whole', [model('member13'), method('pick', 'after', 'label')]));
    const items: Outputs[] = [];
    for await (const item of client.stream('whole', { x })) items.push(item);
    assert.equal(items.length, 1);
    assert.deepEqual(Array.from(items[0]!.label!.data as BigInt64Array), expected.max);
    const single: Outputs[] = [];
    for await (const item of client.stream('member13', { x }, { outputs: ['logits'] })) single.push(item);
    assert.equal(single.length, 1);
    assert.deepEqual(single[0]!.logits!.shape, [5, 10]);
  });

  test('a slow reader slows the first producer: an endless generator runs only a bounded window ahead', async () => {
    await client.deploy(pipeline('endless', [method('source', 'rows', 'endless'), model('member13'), method('pick', 'after', 'label')]));
    const before = await rows.call<{ produced: number; closed: number }>('stats');
    const notes = await client.actor({ name: 'pacer', module: 'test/fixtures/classes.js', export: 'Notebook', cpus: 0.1 });
    let read = 0;
    for await (const { label } of client.stream('endless', { x }, { window: 2 })) {
      assert.equal((label!.data as BigInt64Array)[0], expected.max[0]);
      // A slow reader: a round trip to another actor per item.
      await notes.call('pid');
      if (++read === 30) break;
    }
    // Leaving the loop cancelled every step: the generator's finally ran, once.
    const after = await waitFor('the endless generator stopped', async () => {
      const s = await rows.call<{ produced: number; closed: number }>('stats');
      return s.closed === before.closed + 1 && s;
    });
    const made = after.produced - before.produced;
    // Bounded by the reader's window (2), the step's window (8), the items in flight through the
    // steps after it (8) and one in each hop between: never thousands.
    assert.ok(made >= 30 && made <= 30 + 2 + 8 + 8 + 4, `the generator made ${made} items for 30 read`);
    // The instance takes calls again: the stream no longer holds it.
    assert.deepEqual(await labels(client.stream('by-row', { x })), expected.max);
  });

  test('an instance that dies mid-stream fails the stream with a retryable code, after the items it gave, none twice', async () => {
    await client.deploy(
      pipeline('crashing', [method('source', 'rows', 'crashAfter'), model('member13'), method('pick', 'after', 'label')]),
    );
    const got: bigint[] = [];
    let failure: unknown;
    try {
      for await (const { label } of client.stream('crashing', { x }, { window: 1 })) got.push(...(label!.data as BigInt64Array));
    } catch (err) {
      failure = err;
    }
    assert.ok(failure instanceof TroupeError, String(failure));
    assert.equal(failure.code, 'TROUPE_ERR_ACTOR_DIED', failure.message);
    assert.equal(failure.retryable, true);
    assert.deepEqual(got, expected.max.slice(0, got.length));
    assert.match(failure.message, /step 'crashing > source'/);
    if (got.length > 0) assert.match(failure.message, new RegExp(`after item ${got.length - 1} of the stream`));
    // The instance restarts (with back-off) and streams again.
    await waitFor(
      'the instance READY again',
      async () => (await client.describe()).deployments.find((d) => d.name === 'rows')?.actors[0]?.state === 'READY',
    );
    assert.deepEqual(await labels(client.stream('by-row', { x })), expected.max);
  });

  test('deploy-time checks refuse a stream where items cannot pass on one by one', async () => {
    await rejectsWith(
      client.deploy(
        ensemble('mixed', [pipeline('inner', [method('split', 'rows', 'rows'), model('member13')]), model('member13')], {
          combine: 'mean',
        }),
      ),
      'TROUPE_ERR_BAD_SPEC',
      /ensemble 'mixed' contains 'split', which streams \(a generator method\); streams pass through pipelines only/,
    );
    await rejectsWith(
      client.deploy(pipeline('same-actor', [method('split', 'rows', 'rows'), model('member13'), method('pick', 'rows', 'label')])),
      'TROUPE_ERR_BAD_SPEC',
      /method step 'pick' calls actor 'rows', whose streaming method an earlier step reads: a stream holds its instance until it ends/,
    );
    // A refused graph changes nothing: it is not there to run.
    await rejectsWith(client.run('mixed', { x }), 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /mixed/);
  });
});
