import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Rng, buildMlp } from '../../models/index.js';
import { TroupeError, connect, rendezvous, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const x = seededFloats(64, 9);
const input = () => ({ x: tensor('float32', [1, 64], x) });

/**
 * Eight tenant names, four whose home (the router's rendezvous hash) is each of the two replicas:
 * with maxModels 4 each replica then holds its four, and a healthy model is never evicted unless
 * something else (a bad tenant, an unknown name) pushes it out.
 */
function balancedNames(): string[] {
  const homes: string[][] = [[], []];
  for (let i = 0; homes[0]!.length < 4 || homes[1]!.length < 4; i++) {
    const name = `t${i}`;
    const home = rendezvous(name, 0) > rendezvous(name, 1) ? 0 : 1;
    if (homes[home]!.length < 4) homes[home]!.push(name);
  }
  return [...homes[0]!, ...homes[1]!];
}

async function actorsOf(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

type ModelReport = NonNullable<NonNullable<ActorView['stats']>['models']>[string];

/** The replicas' per-model reports, summed, once their calls (hits + misses) reach `calls`. */
async function settled(client: Cluster, name: string, calls: number): Promise<Map<string, ModelReport>> {
  return waitFor(
    `${name}'s replicas to report ${calls} calls`,
    async () => {
      const sums = new Map<string, ModelReport>();
      for (const a of await actorsOf(client, name))
        for (const [model, c] of Object.entries(a.stats?.models ?? {})) {
          const s = sums.get(model) ?? { loads: 0, hits: 0, misses: 0, loaded: false, evictions: 0, failedLoads: 0 };
          s.loads += c.loads;
          s.hits += c.hits;
          s.misses += c.misses;
          s.evictions! += c.evictions ?? 0;
          s.failedLoads! += c.failedLoads ?? 0;
          s.loaded ||= c.loaded;
          sums.set(model, s);
        }
      const seen = [...sums.values()].reduce((n, c) => n + c.hits + c.misses, 0);
      return seen >= calls ? sums : undefined;
    },
    30_000,
  );
}

/** `/metrics` samples of one multiplex counter for deployment `name`, by member. */
async function metric(url: string, counter: string, name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  const line = new RegExp(`^${counter}\\{model="${name}",member="([^"]+)"\\} (\\d+)$`, 'gm');
  for (const m of text.matchAll(line)) out.set(m[1]!, Number(m[2]));
  return out;
}

describe('multiplexed deployments: a bad tenant or an unknown name costs the healthy ones nothing', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  const healthy = balancedNames();
  const wanted = new Map<string, Float32Array>();
  let badPath = '';

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '8']] });
    await mkdir(join(cluster.modelDir, 'mix'));
    for (const [i, name] of healthy.entries()) {
      const path = join(cluster.modelDir, 'mix', `${name}.onnx`);
      await writeFile(path, buildMlp({ seed: 300 + i, hidden: [32] }).bytes);
      wanted.set(name, (await runInProcess(path, input())).logits!.data as Float32Array);
    }
    badPath = join(cluster.modelDir, 'mix', 'bad.onnx');
    await writeFile(badPath, randomBytes(4096));
    client = await connect(cluster.url);
    await client.deploy({
      name: 'mix',
      model: 'mix',
      replicas: 2,
      cpus: 0.5,
      threads: 1,
      batch: { maxSize: 1 },
      multiplex: { maxModels: 4 },
    });
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

  test('warm tenants with a bad tenant and unknown names interleaved: no healthy model evicted, every answer its own model, the failure remembered', async () => {
    // Warm up one at a time: each model loads in its home replica, four per replica.
    for (const name of healthy) assertAnswer(name, (await client.run('mix', input(), { model: name })).logits!.data as Float32Array);
    const rng = new Rng(7);
    const sequence = Array.from({ length: 600 }, (_, i) =>
      i % 10 === 3 ? 'bad' : i % 10 === 7 ? `unknown${Math.floor(rng.next() * 50)}` : healthy[Math.floor(rng.next() * healthy.length)]!,
    );
    let at = 0;
    let healthyCalls = healthy.length;
    let badCalls = 0;
    const worker = async () => {
      while (at < sequence.length) {
        const name = sequence[at++]!;
        try {
          const out = await client.run('mix', input(), { model: name });
          assert.ok(wanted.has(name), `'${name}' answered`);
          assertAnswer(name, out.logits!.data as Float32Array);
          healthyCalls++;
        } catch (err) {
          assert.ok(err instanceof TroupeError, String(err));
          if (name === 'bad') {
            badCalls++;
            assert.equal(err.code, 'TROUPE_ERR_MODEL_LOAD', err.message);
            assert.match(err.message, /^model 'bad' of deployment 'mix' did not load: /);
            assert.ok(!err.message.includes(cluster.modelDir), `the error shows a server path: ${err.message}`);
          } else {
            assert.ok(name.startsWith('unknown'), `'${name}' failed: ${err.message}`);
            assert.equal(err.code, 'TROUPE_ERR_UNKNOWN_MODEL', err.message);
          }
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.equal(badCalls, 60);

    // Unknown names never reach the counts; the bad tenant's calls are misses only while a load is tried.
    const counts = await settled(client, 'mix', healthyCalls);
    for (const name of healthy) {
      const c = counts.get(name)!;
      assert.equal(c.evictions, 0, `${name} was evicted: ${JSON.stringify(c)}`);
      assert.equal(c.loads, 1, `${name} was loaded more than once: ${JSON.stringify(c)}`);
    }
    const bad = counts.get('bad')!;
    // Remembered: one failed load, then a retry only after each back-off (10 s, doubling) or a changed file,
    // so however slow the machine, far fewer failed loads than calls.
    assert.ok(bad.failedLoads! >= 1 && bad.failedLoads! <= badCalls / 6, JSON.stringify(bad));
    assert.equal(bad.loads, 0);
    assert.ok(![...counts.keys()].some((k) => k.startsWith('unknown')), [...counts.keys()].join());

    // Over HTTP the remembered failure is a 422 naming the tenant.
    const body = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from(x) }] });
    const post = (name: string) =>
      fetch(`${cluster.url}/v2/models/${name}/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const refused = await post('mix:bad');
    assert.equal(refused.status, 422);
    const r = (await refused.json()) as { code: string; error: string };
    assert.equal(r.code, 'TROUPE_ERR_MODEL_LOAD');
    assert.match(r.error, /model 'bad' of deployment 'mix' did not load/);
    assert.ok(!r.error.includes(cluster.modelDir), r.error);

    // The file changes (a good model now): its next call loads it, with no wait for the back-off.
    await writeFile(badPath, buildMlp({ seed: 999, hidden: [32] }).bytes);
    wanted.set('bad', (await runInProcess(badPath, input())).logits!.data as Float32Array);
    const fixed = await post('mix:bad');
    assert.equal(fixed.status, 200, await fixed.clone().text());
    assertAnswer('bad', ((await fixed.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data);

    const failures = await metric(cluster.url, 'troupe_multiplex_load_failures_total', 'mix');
    assert.ok((failures.get('bad') ?? 0) >= 1, JSON.stringify([...failures]));
  });

  test('statistics of a multiplexed deployment: Triton totals, and /metrics counters that never fall when a replica is replaced', async () => {
    const calls = 20;
    for (let i = 0; i < calls; i++) await client.run('mix', input(), { model: healthy[i % healthy.length]! });
    type Stats = { model_stats: { inference_stats: { success: { count: number } }; last_inference: number; batch_stats: unknown[] }[] };
    const stats = await waitFor(
      "mix's statistics to count its calls",
      async () => {
        const s = (await (await fetch(`${cluster.url}/v2/models/mix/stats`)).json()) as Stats;
        return s.model_stats[0]!.inference_stats.success.count >= calls ? s.model_stats[0]! : undefined;
      },
      30_000,
    );
    assert.ok(stats.last_inference > 0, JSON.stringify(stats));
    assert.ok(stats.batch_stats.length > 0, JSON.stringify(stats));

    const counters = ['troupe_multiplex_loads_total', 'troupe_multiplex_hits_total', 'troupe_multiplex_misses_total'];
    const before = await Promise.all(counters.map((c) => metric(cluster.url, c, 'mix')));
    assert.ok((before[1]!.get(healthy[0]!) ?? 0) > 0, 'hits counted');
    // Replace both replicas: their processes die, the agent starts new ones that count from zero.
    const old = await actorsOf(client, 'mix');
    for (const a of old) process.kill(a.pid!, 'SIGKILL');
    await waitFor(
      'new replicas READY',
      async () => {
        const now = await actorsOf(client, 'mix');
        return now.length === 2 && now.every((a) => a.state === 'READY' && !old.some((o) => o.pid === a.pid)) ? true : undefined;
      },
      60_000,
    );
    for (const name of healthy) assertAnswer(name, (await client.run('mix', input(), { model: name })).logits!.data as Float32Array);
    // The new replicas' loads are counted on top of the old ones' (reported about once a second).
    await waitFor(
      'the new replicas to report their loads',
      async () => {
        const loads = await metric(cluster.url, counters[0]!, 'mix');
        return healthy.every((m) => (loads.get(m) ?? 0) > (before[0]!.get(m) ?? 0)) ? true : undefined;
      },
      30_000,
    );
    const afterwards = await Promise.all(counters.map((c) => metric(cluster.url, c, 'mix')));
    for (const [i, counter] of counters.entries())
      for (const [member, value] of before[i]!)
        assert.ok(
          (afterwards[i]!.get(member) ?? 0) >= value,
          `${counter}{member=${member}} fell from ${value} to ${afterwards[i]!.get(member)}`,
        );
    const again = (await (await fetch(`${cluster.url}/v2/models/mix/stats`)).json()) as Stats;
    assert.ok(again.model_stats[0]!.inference_stats.success.count >= stats.inference_stats.success.count + healthy.length);
  });
});
