import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Rng, buildMlp } from '../../models/index.js';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import { StreamReader } from '../helpers/status-stream.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const MODELS = 20;
const WARM_UP = 500;
const CALLS = 4000;
/** Zipf's exponent: with 8 model slots over 20 models, s = 2 puts 96% of calls on the 8 most used (s = 1 puts 76%). */
const ZIPF_S = 2;

const x = seededFloats(64, 9);
const input = () => ({ x: tensor('float32', [1, 64], x) });
const names = Array.from({ length: MODELS }, (_, i) => `m${i}`);

/** A seeded Zipf(s) sampler over `names`: rank k is drawn with probability proportional to 1 / k^s. */
function zipf(seed: number): () => string {
  const rng = new Rng(seed);
  const weights = names.map((_, k) => 1 / (k + 1) ** ZIPF_S);
  const total = weights.reduce((a, b) => a + b, 0);
  return () => {
    let u = rng.next() * total;
    for (let k = 0; k < names.length; k++) if ((u -= weights[k]!) < 0) return names[k]!;
    return names[names.length - 1]!;
  };
}

async function actorsOf(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

type Counts = { loads: number; hits: number; misses: number };

/** The replicas' reported counts (about once a second), once they account for `calls` calls. */
async function settledCounts(
  client: Cluster,
  name: string,
  calls: number,
): Promise<{ total: Counts; perReplica: Record<string, Counts & { loaded: boolean }>[] }> {
  return waitFor(
    `${name}'s replicas to report ${calls} calls`,
    async () => {
      const reports = (await actorsOf(client, name)).map((a) => a.stats?.models ?? {});
      const total = { loads: 0, hits: 0, misses: 0 };
      for (const r of reports)
        for (const c of Object.values(r)) {
          total.loads += c.loads;
          total.hits += c.hits;
          total.misses += c.misses;
        }
      return total.hits + total.misses === calls ? { total, perReplica: reports } : undefined;
    },
    20_000,
  );
}

describe('multiplexed deployments: many models per replica', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const wanted = new Map<string, Float32Array>();

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    await mkdir(join(cluster.modelDir, 'tenants'));
    for (const [i, name] of names.entries()) {
      const path = join(cluster.modelDir, 'tenants', `${name}.onnx`);
      await writeFile(path, buildMlp({ seed: 100 + i, hidden: [32] }).bytes);
      wanted.set(name, (await runInProcess(path, input())).logits!.data as Float32Array);
    }
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  const assertAnswer = (name: string, logits: ArrayLike<number>) => {
    const w = wanted.get(name)!;
    for (let i = 0; i < w.length; i++)
      assert.ok(Math.abs(logits[i]! - w[i]!) < 1e-5, `${name}: logit ${i} is ${logits[i]}, onnxruntime says ${w[i]}`);
  };

  test("20 models, 2 replicas of maxModels 4, 4,000 calls of a Zipf workload: every answer is its model's, >= 90% of calls hit a loaded model", async (t) => {
    await client.deploy({ name: 'tenants', model: 'tenants', replicas: 2, cpus: 0.5, threads: 1, multiplex: { maxModels: 4 } });
    const next = zipf(42);
    const play = async (calls: number) => {
      const sequence = Array.from({ length: calls }, next);
      let at = 0;
      const worker = async () => {
        while (at < sequence.length) {
          const name = sequence[at++]!;
          const out = await client.run('tenants', input(), { model: name });
          assertAnswer(name, out.logits!.data as Float32Array);
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
    };
    // The hit rate is the steady state's, as a cache's is measured: after the first loads of the set.
    await play(WARM_UP);
    const warm = (await settledCounts(client, 'tenants', WARM_UP)).total;
    await play(CALLS);
    const { total, perReplica } = await settledCounts(client, 'tenants', WARM_UP + CALLS);
    const hits = total.hits - warm.hits;
    const hitRate = hits / CALLS;
    const what = `hit rate ${hitRate.toFixed(3)} over ${CALLS} calls after ${WARM_UP} (${total.loads - warm.loads} loads)`;
    t.diagnostic(what);
    assert.ok(hitRate >= 0.9, what);
    for (const replica of perReplica) {
      const loaded = Object.values(replica).filter((c) => c.loaded).length;
      assert.ok(loaded <= 4, `a replica holds ${loaded} models, over maxModels 4`);
    }
    // The status page's stream: the deployment's most called models, and each replica's share of hits.
    const stream = new StreamReader(cluster.url);
    try {
      const snapshot = await stream.until('the models in the status stream', (s) =>
        (s.deployments.find((d) => d.name === 'tenants')?.models?.length ?? 0) > 0 ? s : undefined,
      );
      const models = snapshot.deployments.find((d) => d.name === 'tenants')!.models!;
      assert.equal(models[0]!.name, 'm0', 'the most called model first');
      assert.ok(models[0]!.loads >= 1 && models[0]!.hits > models[0]!.misses, JSON.stringify(models[0]));
      for (const a of snapshot.actors.filter((x) => x.deployment === 'tenants')) assert.ok(a.models && a.models.loaded.length <= 4);
    } finally {
      stream.close();
    }
    const metrics = await (await fetch(`${cluster.url}/metrics`)).text();
    assert.match(metrics, /troupe_multiplex_hits_total\{model="tenants",member="m0"\} \d+/);
    assert.match(metrics, /troupe_multiplex_loads_total\{model="tenants",member="m0"\} \d+/);
  });

  test('many calls at once for a model not yet loaded load it once in the replica', async () => {
    await client.deploy({ name: 'one', model: 'tenants', replicas: 1, cpus: 0.5, threads: 1, multiplex: { maxModels: 2 } });
    const outs = await Promise.all(Array.from({ length: 16 }, () => client.run('one', input(), { model: 'm7' })));
    for (const out of outs) assertAnswer('m7', out.logits!.data as Float32Array);
    const { perReplica } = await settledCounts(client, 'one', 16);
    // Calls that reach the replica while it loads wait for that one load (misses); later ones find it loaded.
    const m7 = perReplica[0]!.m7!;
    assert.equal(m7.loads, 1, JSON.stringify(m7));
    assert.equal(m7.hits + m7.misses, 16);
  });

  test('OIP names a model as {deployment}:{model}; an unknown model, a missing one and one given to a plain deployment are refused', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] });
    const post = (name: string) =>
      fetch(`${cluster.url}/v2/models/${name}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const ok = await post('tenants:m3');
    assert.equal(ok.status, 200);
    const answer = (await ok.json()) as { model_name: string; outputs: { data: number[] }[] };
    assert.equal(answer.model_name, 'tenants:m3');
    assertAnswer('m3', answer.outputs[0]!.data);
    const unknown = await post('tenants:nope');
    assert.equal(unknown.status, 404, await unknown.clone().text());
    const u = (await unknown.json()) as { error: string; code: string };
    assert.equal(u.code, 'TROUPE_ERR_UNKNOWN_MODEL');
    assert.match(u.error, /deployment 'tenants' has no model 'nope'$/);
    assert.doesNotMatch(u.error, /m0|m1/, 'the other models are not named to a caller who may hold no token');
    const none = await post('tenants');
    assert.equal(none.status, 400);
    assert.match(((await none.json()) as { error: string }).error, /serves several models: name one/);
    await client.deploy({ name: 'single', model: 'mlp.onnx', cpus: 0.5, threads: 1 });
    assert.equal((await post('single:m1')).status, 404);
    await assert.rejects(
      async () => client.run('single', input(), { model: 'm1' }),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_REQUEST' && /serves one model/.test(err.message),
    );
  });

  test('a model added to the directory while the deployment runs is a member at its first call (found by the model-based test)', async () => {
    const path = join(cluster.modelDir, 'tenants', 'late.onnx');
    await writeFile(path, buildMlp({ seed: 99, hidden: [32] }).bytes);
    wanted.set('late', (await runInProcess(path, input())).logits!.data as Float32Array);
    for (let i = 0; i < 4; i++)
      assertAnswer('late', (await client.run('tenants', input(), { model: 'late' })).logits!.data as Float32Array);
  });

  test('gRPC names a model of the set as {deployment}:{model} too', async () => {
    const grpc = grpcClient(cluster.grpcAddress);
    try {
      const answer = await grpc.call<{ model_name: string; raw_output_contents: Buffer[] }>('ModelInfer', {
        model_name: 'tenants:m5',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64] }],
        raw_input_contents: [rawFloats(x)],
      });
      assert.equal(answer.model_name, 'tenants:m5');
      assertAnswer('m5', floatsOfRaw(answer.raw_output_contents[0]!));
    } finally {
      grpc.close();
    }
  });

  test('a model over maxModelMemory is refused with TROUPE_ERR_MODEL_TOO_LARGE, and a replica keeps serving the others', async () => {
    await client.deploy({
      name: 'small',
      model: 'tenants',
      replicas: 1,
      cpus: 0.5,
      threads: 1,
      multiplex: { maxModels: 4, maxModelMemory: 1000 },
    });
    await assert.rejects(
      async () => client.run('small', input(), { model: 'm1' }),
      (err: unknown) =>
        err instanceof TroupeError && err.code === 'TROUPE_ERR_MODEL_TOO_LARGE' && /over its maxModelMemory of 1000/.test(err.message),
    );
    const out = await client.run('tenants', input(), { model: 'm1' });
    assertAnswer('m1', out.logits!.data as Float32Array);
  });
});
