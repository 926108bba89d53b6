import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Batcher } from '../../actors/batcher.js';
import type { RunModel } from '../../actors/batcher.js';
import { MAX_BATCH_SIZES_REPORTED, TroupeError, tensor } from '../../runtime/internal.js';
import type { CallTotals, Tensor } from '../../runtime/internal.js';
import { CallTotalsRecorder } from '../../actors/call-totals.js';
import { InferenceStatistics } from '../../head/state/inference-statistics.js';

const call = (rows: number): Record<string, Tensor> => ({ x: tensor('float32', [rows, 2], new Float32Array(2 * rows)) });
const echo: RunModel = async (inputs) => ({ y: inputs.x! });

describe("Triton's statistics: what an actor totals and what the head sums", { timeout: 10_000 }, () => {
  test('a batch charges each of its calls its input, run and output times; its size counts one execution', async () => {
    const b = new Batcher(echo, { maxSize: 8, maxDelayMs: 0, batchable: true });
    // Submitted in one turn: one batch of 1 + 2 + 3 rows.
    await Promise.all([1, 2, 3].map((rows) => b.submit(call(rows))));
    await b.submit(call(4));
    const t = b.totals.totals;
    assert.equal(t.success.count, 4);
    assert.equal(t.queue.count, 4);
    for (const phase of [t.computeInput, t.computeInfer, t.computeOutput]) assert.equal(phase.count, 4);
    assert.deepEqual(Object.keys(t.bySize).sort(), ['4', '6']);
    assert.equal(t.bySize['6']!.count, 1, 'the three calls ran once, as 6 rows');
    assert.equal(t.bySize['4']!.count, 1);
    assert.ok(t.success.ms >= t.computeInfer.ms, 'a call took at least its run');
    assert.deepEqual(t.fail, { count: 0, ms: 0 });
    assert.ok(t.lastAt > 0);
  });

  test('calls a failed run held, and calls dropped at their deadline, count as failures', async () => {
    const b = new Batcher(async () => Promise.reject(new TroupeError('TROUPE_ERR_INFERENCE', 'boom')), {
      maxSize: 1,
      maxDelayMs: 0,
      batchable: true,
    });
    await assert.rejects(b.submit(call(1)), /boom/);
    await assert.rejects(b.submit(call(1), undefined, 0), /deadline passed/);
    assert.equal(b.totals.totals.fail.count, 2);
    assert.equal(b.totals.totals.success.count, 0);
  });

  test('batch sizes past the bound are charged to the largest kept: a report stays small, the sums stay right', () => {
    const r = new CallTotalsRecorder();
    for (let rows = 1; rows <= MAX_BATCH_SIZES_REPORTED + 5; rows++) r.executed([0], rows, { inputMs: 0, inferMs: 1, outputMs: 0 });
    const sizes = Object.values(r.totals.bySize);
    assert.equal(sizes.length, MAX_BATCH_SIZES_REPORTED);
    assert.equal(
      sizes.reduce((n, s) => n + s.count, 0),
      MAX_BATCH_SIZES_REPORTED + 5,
    );
    assert.equal(r.totals.bySize[String(MAX_BATCH_SIZES_REPORTED)]!.count, 6);
  });

  const totals = (success: number, ms: number, sizes: Record<string, number>, lastAt = 1000): CallTotals => ({
    success: { count: success, ms },
    fail: { count: 0, ms: 0 },
    queue: { count: success, ms: ms / 2 },
    computeInput: { count: success, ms: 0 },
    computeInfer: { count: success, ms: ms / 2 },
    computeOutput: { count: success, ms: 0 },
    lastAt,
    bySize: Object.fromEntries(Object.entries(sizes).map(([k, count]) => [k, { count, inputMs: 0, inferMs: count, outputMs: 0 }])),
  });

  test('the head adds only increases, and a restarted actor (its totals back near zero) from zero', () => {
    const stats = new InferenceStatistics();
    const first = totals(2, 4, { '1': 2 });
    stats.absorb(undefined, first);
    const second = totals(5, 10, { '1': 3, '4': 1 }, 2000);
    stats.absorb(first, second);
    // The actor restarted: its new process reports from zero.
    stats.absorb(second, totals(1, 1, { '1': 1 }, 3000));
    const out = stats.triton('m', '1', 9, 5);
    assert.deepEqual(out.inference_stats.success, { count: 6, ns: 11_000_000 });
    assert.deepEqual(out.inference_stats.compute_infer, { count: 6, ns: 5_500_000 });
    assert.deepEqual(
      out.batch_stats.map((b) => [b.batch_size, b.compute_infer.count, b.compute_infer.ns]),
      [
        [1, 4, 4_000_000],
        [4, 1, 1_000_000],
      ],
    );
    assert.equal(out.inference_count, 9);
    assert.equal(out.execution_count, 5);
    assert.equal(out.last_inference, 3000);
    assert.deepEqual(out.inference_stats.cache_miss, { count: 0, ns: 0 });
  });
});
