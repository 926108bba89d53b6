import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import { bestRow } from '../../cli/tune.js';
import type { TuneRow } from '../../cli/tune.js';
import { layoutLabel, specOf, sweep } from '../../cli/tune/layouts.js';

test('the sweep: the first-deploy layout, then each split of the cores, sessions of one thread first, per batch size and delay', () => {
  const layouts = sweep(2, [1, 64], [0, 2]);
  assert.equal(layoutLabel(layouts[0]!), 'first deploy (nothing named: chosen at load)');
  const shapes = (batch: number, delay: number) =>
    layouts
      .filter((l) => !l.auto && l.batchMaxSize === batch && l.delayMs === delay)
      .map((l) => `${l.replicas}x${l.instances}x${l.threads}`);
  assert.deepEqual(shapes(1, 0), ['1x2x1', '1x1x1', '2x1x1', '1x1x2']);
  assert.deepEqual(shapes(1, 2), [], 'no delay without batching');
  assert.deepEqual(shapes(64, 2), shapes(1, 0));
  assert.equal(layouts.length, 1 + 4 * 3);
  for (let cpus = 1; cpus <= 8; cpus++)
    for (const l of sweep(cpus, [1], [0]).filter((x) => !x.auto))
      assert.ok(l.replicas * l.instances * l.threads <= cpus, `${cpus}: ${layoutLabel(l)}`);
});

test('every layout is a spec a deploy accepts, the first-deploy one naming nothing but the model', () => {
  for (const l of sweep(4, [1, 8], [0, 5])) ModelDeploymentSchema.parse(specOf('m', 'mlp.onnx', l));
  assert.deepEqual(specOf('m', 'mlp.onnx', sweep(2, [1], [0])[0]!), { name: 'm', model: 'mlp.onnx' });
  const waiting = sweep(1, [8], [5]).find((l) => !l.auto)!;
  assert.deepEqual(specOf('m', 'x.onnx', waiting).batch, { maxSize: 8, maxDelayMs: 5, waitWhenIdle: true });
});

test('the best row: the fastest without errors, within the p99 budget when one is given', () => {
  const [a, b, c] = sweep(2, [1], [0]);
  const row = (layout: typeof a, rps: number, p99Ms: number, errors = 0): TuneRow => ({
    layout: layout!,
    result: { concurrency: 1, requests: 10, errors, seconds: 1, rps, p50Ms: p99Ms / 2, p90Ms: p99Ms, p99Ms },
  });
  const rows = [row(a, 100, 5), row(b, 300, 50), row(c, 400, 1, 3)];
  assert.equal(bestRow(rows, undefined), rows[1], 'errors disqualify');
  assert.equal(bestRow(rows, 10), rows[0]);
  assert.equal(bestRow(rows, 0.5), undefined);
});
