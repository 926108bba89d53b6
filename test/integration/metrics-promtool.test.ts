import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { lintExposition } from '../helpers/prom-lint.js';
import { seededFloats } from '../helpers/tensors.js';

/** promtool (Debian package `prometheus`) where installed; .ci/run installs it. */
const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore', timeout: 10_000 }).status === 0;

describe('/metrics: clean under promtool, inference counted in rows as Triton counts it', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  const scrape = async () => (await call(cluster.url, 'GET', '/metrics')).body.toString('utf8');
  const value = (text: string, series: string) =>
    Number(
      text
        .split('\n')
        .find((l) => l.startsWith(`${series} `))
        ?.split(' ')[1] ?? Number.NaN,
    );

  before(async () => {
    cluster = await startCluster();
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1, batch: { maxSize: 8 } }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    // Two requests, of 3 and 4 rows.
    for (const rows of [3, 4]) {
      const answer = await call(cluster.url, 'POST', '/v2/models/mlp/infer', {
        body: JSON.stringify({
          inputs: [{ name: 'x', shape: [rows, 64], datatype: 'FP32', data: Array.from(seededFloats(rows * 64, rows)) }],
        }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(answer.status, 200, answer.body.toString());
    }
  });
  after(async () => {
    await cluster?.stop();
  });

  test('inference counters count rows and requests, as counters named _total', async () => {
    const text = await waitFor('the actor to report its 7 rows', async () => {
      const t = await scrape();
      return value(t, 'troupe_inference_count_total{model="mlp"}') === 7 ? t : undefined;
    });
    assert.match(text, /^# TYPE troupe_inference_count_total counter$/m);
    assert.equal(value(text, 'troupe_inference_request_success_total{model="mlp"}'), 2, 'two requests, whatever their rows');
    const exec = value(text, 'troupe_inference_exec_count_total{model="mlp"}');
    assert.ok(exec >= 1 && exec <= 2, `executions ${exec}`);
    assert.match(text, /^# TYPE troupe_actor_restarts_total counter$/m);
    assert.match(text, /^troupe_actor_restarts_total\{model="mlp",actor="mlp#0"\} 0$/m);
    assert.match(text, /^# TYPE troupe_process_cpu_seconds_total counter$/m);
    for (const old of [
      'troupe_inference_count ',
      'troupe_inference_exec_count ',
      'troupe_inference_failure_count',
      'troupe_actor_restarts ',
      'troupe_process_cpu_seconds ',
      'troupe_head_nodejs_active_handles_total',
    ]) {
      assert.ok(!text.includes(`# TYPE ${old}`), `${old.trim()} is gone`);
    }
  });

  test('every family passes the exposition checks (the parser check; promtool itself below where installed)', async () => {
    const text = await waitFor('agent and actor processes in /metrics', async () => {
      const t = await scrape();
      return /^troupe_process_cpu_seconds_total\{node="[^"]+",role="actor",actor="mlp#0"\} /m.test(t) ? t : undefined;
    });
    assert.deepEqual(lintExposition(text), [], text);
  });

  test(
    'promtool check metrics reports nothing',
    { skip: promtool ? false : 'promtool is not installed (Debian package prometheus); the parser check above ran instead' },
    async () => {
      const text = await scrape();
      const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
      assert.equal(run.status, 0, `promtool: ${run.stdout}${run.stderr}`);
      assert.equal(`${run.stdout}${run.stderr}`.trim(), '');
    },
  );
});
