import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lintExposition } from '../helpers/prom-lint.js';

test("the parser check finds what promtool found in the head's old /metrics", () => {
  const old = [
    '# HELP troupe_inference_count Successful inference requests.',
    '# TYPE troupe_inference_count counter',
    'troupe_inference_count{model="mlp"} 2',
    '# HELP troupe_head_nodejs_active_handles_total Total number of active handles.',
    '# TYPE troupe_head_nodejs_active_handles_total gauge',
    'troupe_head_nodejs_active_handles_total 3',
    '# TYPE troupe_no_help gauge',
    'troupe_no_help 1',
    '# HELP troupe_queue_count Requests waiting.',
    '# TYPE troupe_queue_count gauge',
    'troupe_queue_count 1',
    'troupe_untyped 1',
    '',
  ].join('\n');
  assert.deepEqual(lintExposition(old).sort(), [
    'line 12: troupe_untyped has no TYPE line before it',
    'troupe_head_nodejs_active_handles_total: non-counter metrics should not have "_total" suffix',
    'troupe_inference_count: counter metrics should have "_total" suffix',
    'troupe_inference_count: non-histogram and non-summary metrics should not have "_count" suffix',
    'troupe_no_help: no help text',
    'troupe_queue_count: non-histogram and non-summary metrics should not have "_count" suffix',
  ]);
});

test('a histogram and a counter as prom-client writes them pass', () => {
  const good = [
    '# HELP x_seconds Time.',
    '# TYPE x_seconds histogram',
    'x_seconds_bucket{le="0.1"} 1',
    'x_seconds_bucket{le="+Inf"} 2',
    'x_seconds_sum 0.3',
    'x_seconds_count 2',
    '# HELP y_total Things.',
    '# TYPE y_total counter',
    'y_total{a="b \\"q\\""} 5',
    '',
  ].join('\n');
  assert.deepEqual(lintExposition(good), []);
});
