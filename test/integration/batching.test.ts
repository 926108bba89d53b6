import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, tensor } from '../../runtime/internal.js';
import type { ActorView, Cluster, Outputs } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

async function actorsOf(client: Cluster, name: string): Promise<ActorView[]> {
  return (await client.describe()).deployments.find((d) => d.name === name)?.actors ?? [];
}

/** Waits until the actors' reported totals (sent about once a second) account for `calls` calls. */
async function settledStats(client: Cluster, name: string, calls: number) {
  return waitFor(
    `${name}'s actor stats to report ${calls} calls`,
    async () => {
      const actors = await actorsOf(client, name);
      const total = actors.reduce((n, a) => n + (a.stats?.calls ?? 0), 0);
      return total === calls ? actors : undefined;
    },
    10_000,
  );
}

describe('dynamic batching, back-pressure, deadlines, retries', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '16']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('a burst of 64 calls forms batches larger than 1, and every caller gets exactly its own rows', async () => {
    await client.deploy({ name: 'mlp8', model: 'mlp.onnx', threads: 1, batch: { maxSize: 8 } });
    const inputs = Array.from({ length: 64 }, (_, i) => tensor('float32', [1, 64], seededFloats(64, 1000 + i)));
    const results = await Promise.all(inputs.map((x) => client.run('mlp8', { x })));
    const expected = await runInProcess(cluster.models.mlp, {
      x: tensor('float32', [64, 64], Float32Array.from(inputs.flatMap((t) => [...(t.data as Float32Array)]))),
    });
    const all = expected.logits!.data as Float32Array;
    results.forEach((r, i) => {
      assert.deepEqual(r.logits!.shape, [1, 10]);
      const mine = [...(r.logits!.data as Float32Array)];
      const want = [...all.subarray(i * 10, (i + 1) * 10)];
      for (let k = 0; k < 10; k++)
        assert.ok(
          Math.abs(mine[k]! - want[k]!) <= 1e-5 * Math.max(1, Math.abs(want[k]!)),
          `call ${i} logit ${k}: ${mine[k]} vs ${want[k]}`,
        );
    });
    const [actor] = await settledStats(client, 'mlp8', 64);
    const stats = actor!.stats!;
    assert.equal(stats.rows, 64);
    assert.ok(stats.batches < 64, `expected batches larger than 1, got ${stats.batches} runs for 64 calls`);
    assert.ok(stats.rows / stats.batches > 1);
  });

  test('/metrics: rows over model executions is the mean batch size; actor and agent processes are reported', async () => {
    const scrape = async () => (await fetch(`${cluster.url}/metrics`)).text();
    const value = (text: string, metric: string) => Number(new RegExp(`^${metric} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const text = await waitFor('exec count to reach the actor totals', async () => {
      const t = await scrape();
      const actor = (await actorsOf(client, 'mlp8'))[0]!;
      return value(t, 'troupe_inference_exec_count_total\\{model="mlp8"\\}') === actor.stats?.batches ? t : undefined;
    });
    // 64 calls of one row each: 64 rows, as Triton counts inferences, and 64 requests.
    assert.equal(value(text, 'troupe_inference_count_total\\{model="mlp8"\\}'), 64);
    assert.equal(value(text, 'troupe_inference_request_success_total\\{model="mlp8"\\}'), 64);
    const exec = value(text, 'troupe_inference_exec_count_total\\{model="mlp8"\\}');
    assert.ok(exec > 0 && exec < 64, `exec count ${exec}`);
    assert.match(text, /^troupe_request_duration_seconds_count\{model="mlp8"\} 64$/m);
    assert.match(text, /^troupe_actors\{model="mlp8",state="READY"\} 1$/m);
    assert.match(text, /^troupe_head_process_resident_memory_bytes \d+/m);
    await waitFor('agent and actor process memory in /metrics', async () => {
      const t = await scrape();
      return (
        /troupe_process_resident_memory_bytes\{node="n1",role="agent",actor=""\} \d+/.test(t) && /role="actor",actor="mlp8#0"\} \d+/.test(t)
      );
    });
  });

  test('calls whose non-batch dims differ are never mixed in one batch', async () => {
    await client.deploy({ name: 'rowsum', model: 'rowsum.onnx', threads: 1, batch: { maxSize: 16 } });
    const widths = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? 3 : 5));
    const inputs = widths.map((w, i) => tensor('float32', [2, w], seededFloats(2 * w, 50 + i)));
    const results: Outputs[] = await Promise.all(inputs.map((x) => client.run('rowsum', { x })));
    results.forEach((r, i) => {
      const x = inputs[i]!.data as Float32Array;
      const w = widths[i]!;
      const want = [0, 1].map((row) => x.subarray(row * w, (row + 1) * w).reduce((a, b) => a + b, 0));
      assert.deepEqual(r.y!.shape, [2, 1]);
      [0, 1].forEach((row) => assert.ok(Math.abs((r.y!.data as Float32Array)[row]! - want[row]!) < 1e-5, `call ${i} row ${row}`));
    });
    const [actor] = await settledStats(client, 'rowsum', 40);
    assert.ok(actor!.stats!.batches >= 2, 'two shapes need at least two runs');
    assert.ok(actor!.stats!.batches < 40, 'calls of the same shape were batched');
  });

  test('a call that finds its replica idle runs at once: maxDelayMs holds no call unless waitWhenIdle asks', async () => {
    // Sixty seconds of delay: a replica that made a lone call wait for company would miss the deadline.
    await client.deploy({ name: 'idle', model: 'mlp.onnx', threads: 1, batch: { maxSize: 32, maxDelayMs: 60_000 } });
    for (let i = 0; i < 5; i++) {
      const out = await client.run('idle', { x: tensor('float32', [1, 64], seededFloats(64, 300 + i)) }, { timeoutMs: 10_000 });
      assert.deepEqual(out.logits!.shape, [1, 10]);
    }
    const [actor] = await settledStats(client, 'idle', 5);
    assert.deepEqual([actor!.stats!.batches, actor!.stats!.rows], [5, 5], 'each call ran alone, at once');
  });

  test('waitWhenIdle: the first call waits for company until its batch is full', async () => {
    await client.deploy({ name: 'wait4', model: 'mlp.onnx', threads: 1, batch: { maxSize: 4, maxDelayMs: 60_000, waitWhenIdle: true } });
    let answered = 0;
    const calls: PromiseLike<Outputs>[] = [];
    for (let i = 0; i < 4; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 50));
      assert.equal(answered, 0, `no call answered before call ${i} was sent`);
      calls.push(
        client
          .run('wait4', { x: tensor('float32', [1, 64], seededFloats(64, 400 + i)) }, { timeoutMs: 20_000 })
          .then((out) => (answered++, out)),
      );
    }
    for (const out of await Promise.all(calls)) assert.deepEqual(out.logits!.shape, [1, 10]);
    const [actor] = await settledStats(client, 'wait4', 4);
    assert.deepEqual([actor!.stats!.batches, actor!.stats!.rows], [1, 4], 'the four calls ran as one batch');
  });

  test('a full queue fails new calls at once with OVERLOADED; the accepted ones all succeed', async () => {
    // One replica may hold 2 calls (maxSize 1), one more may wait: the other 5 are refused.
    await client.deploy({ name: 'slow', model: 'mobilenet.onnx', threads: 1, maxQueue: 1, batch: { maxSize: 1 } });
    const x = tensor('float32', [4, 3, 224, 224], seededFloats(4 * 3 * 224 * 224, 9));
    const order: string[] = [];
    const calls = Array.from({ length: 8 }, (_, i) =>
      client.run('slow', { image: x }).then(
        () => order.push(`ok${i}`),
        (err: unknown) => order.push(err instanceof TroupeError ? err.code : String(err)),
      ),
    );
    await Promise.all(calls);
    const overloaded = order.filter((o) => o === 'TROUPE_ERR_OVERLOADED').length;
    assert.equal(overloaded, 5, order.join(' '));
    assert.equal(order.filter((o) => o.startsWith('ok')).length, 3, order.join(' '));
    // Refusals come back before any accepted call finishes: nothing waited for them.
    assert.ok(
      order.slice(0, 5).every((o) => o === 'TROUPE_ERR_OVERLOADED'),
      order.join(' '),
    );
  });

  test('a call whose deadline passes while queued gets DEADLINE_EXCEEDED and is never run', async () => {
    // The previous test ran exactly 3 calls on this deployment.
    const before = (await settledStats(client, 'slow', 3))[0]!.stats!.calls;
    const big = tensor('float32', [8, 3, 224, 224], seededFloats(8 * 3 * 224 * 224, 10));
    const small = tensor('float32', [1, 3, 224, 224], seededFloats(3 * 224 * 224, 11));
    const long = client.run('slow', { image: big });
    await assert.rejects(
      () => Promise.resolve(client.run('slow', { image: small }, { timeoutMs: 20 })),
      (err: unknown) => {
        assert.ok(err instanceof TroupeError);
        assert.equal(err.code, 'TROUPE_ERR_DEADLINE_EXCEEDED', err.message);
        return true;
      },
    );
    await long;
    const [actor] = await settledStats(client, 'slow', before + 1);
    assert.equal(actor!.stats!.calls, before + 1, 'only the long call ran');
  });

  test('killing a replica under load loses no request that had not produced a result', async () => {
    const view = await client.deploy({ name: 'pair', model: 'mlp.onnx', threads: 1, replicas: 2, batch: { maxSize: 8 } });
    const victim = view.actors[0]!.pid!;
    let sent = 0;
    const results: PromiseLike<unknown>[] = [];
    for (let wave = 0; wave < 10; wave++) {
      for (let i = 0; i < 30; i++) {
        sent++;
        results.push(client.run('pair', { x: tensor('float32', [1, 64], seededFloats(64, wave * 100 + i)) }));
      }
      if (wave === 3) process.kill(victim, 'SIGKILL');
      await new Promise((r) => setTimeout(r, 20));
    }
    const outcomes = await Promise.allSettled(results);
    const failed = outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason));
    assert.equal(sent, 300);
    assert.deepEqual(failed, [], 'every request succeeded (retried on the other replica)');
    await waitFor(
      'the killed replica to be READY again',
      async () => (await actorsOf(client, 'pair')).every((a) => a.state === 'READY' && a.pid !== victim) || undefined,
      20_000,
    );
  });

  test('autoscaling adds a replica under sustained load and removes it when the load is gone, recording each decision', async () => {
    await client.deploy({
      name: 'auto',
      model: 'mobilenet.onnx',
      threads: 1,
      autoscale: { minReplicas: 1, maxReplicas: 2, targetPerReplica: 1, upDelayMs: 200, downDelayMs: 1000 },
    });
    const image = tensor('float32', [1, 3, 224, 224], seededFloats(3 * 224 * 224, 12));
    let loading = true;
    const worker = async () => {
      while (loading) await client.run('auto', { image });
    };
    const workers = Array.from({ length: 6 }, worker);
    try {
      await waitFor(
        'a second READY replica',
        async () => (await actorsOf(client, 'auto')).filter((a) => a.state === 'READY').length === 2 || undefined,
        30_000,
      );
    } finally {
      loading = false;
      await Promise.all(workers);
    }
    await waitFor(
      'the deployment to scale back to 1 replica',
      async () => (await actorsOf(client, 'auto')).length === 1 || undefined,
      30_000,
    );
    const events = (await client.describe()).events.filter((e) => e.kind === 'scaled' && e.message.startsWith('auto:'));
    assert.ok(
      events.some((e) => /auto: 1 -> 2 replicas \(load \d+/.test(e.message)),
      JSON.stringify(events),
    );
    assert.ok(
      events.some((e) => /auto: 2 -> 1 replicas/.test(e.message)),
      JSON.stringify(events),
    );
  });
});
