import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import { childrenRunning } from '../helpers/processes.js';

/**
 * No input stalls the head: while hostile bodies (a 60,000-key YAML spec, tens of MB of empty
 * BYTES strings, a huge declared shape) are refused, normal inferences keep answering. Each hostile
 * body goes to the head itself (a kept-alive connection that began with GET /healthz stays with the
 * head) and to a front-door worker (a fresh connection whose first request is the inference).
 */

const WORKER = 'front-door/worker-main';
/** A stall of the old code lasted 26 s; a busy 2-core CI machine answers well within this. */
const BOUND_MS = 2000;

type Answer = { status: number; json: unknown };
type Send = (method: string, path: string, body?: Buffer | string, headers?: Record<string, string>) => Promise<Answer>;

function sender(base: string, agent: Agent | false): Send {
  return (method, path, body, headers = {}) =>
    nodeCall(base, method, path, { ...(body === undefined ? {} : { body }), headers, agent, timeoutMs: 60_000 });
}

const normalBody = JSON.stringify({
  inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: Array.from({ length: 64 }, (_, i) => i / 64) }],
});

/** Normal inferences in a loop until stopped, on the head's own connection and on fresh ones (workers). */
function normalLoad(base: string): { stop: () => Promise<{ calls: number; maxMs: number; slow: number[] }> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const viaHead = sender(base, agent);
  const fresh = sender(base, false);
  let running = true;
  const latencies: number[] = [];
  const loop = async (send: Send) => {
    while (running) {
      const started = performance.now();
      const r = await send('POST', '/v2/models/mlp/infer', normalBody, { 'content-type': 'application/json' });
      latencies.push(performance.now() - started);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  const loops = (async () => {
    assert.equal((await viaHead('GET', '/healthz')).status, 200);
    await Promise.all([loop(viaHead), loop(fresh)]);
  })();
  return {
    stop: async () => {
      running = false;
      await loops;
      agent.destroy();
      return { calls: latencies.length, maxMs: Math.max(...latencies), slow: latencies.filter((ms) => ms > BOUND_MS) };
    },
  };
}

/** A connection the head keeps (its first request is not an inference). */
async function headConnection(base: string): Promise<{ send: Send; close: () => void }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = sender(base, agent);
  assert.equal((await send('GET', '/healthz')).status, 200);
  return { send, close: () => agent.destroy() };
}

function yamlKeys(n: number): string {
  return Array.from({ length: n }, (_, i) => `k${i}: ${i}`).join('\n');
}

/** `n` empty BYTES strings for the float32 MLP: JSON.parse of them took the old head to ~1 GB. */
function emptyStrings(n: number, datatype: string, shape: number[]): Buffer {
  return Buffer.from(`{"inputs":[{"name":"x","datatype":"${datatype}","data":[${'"",'.repeat(n - 1)}""],"shape":[${shape.join(',')}]}]}`);
}

describe('no input stalls the head', { timeout: 170_000 }, () => {
  let cluster: TestCluster;
  let workers: number[];

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '1'] });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    await waitFor('a front-door worker', async () => (await childrenRunning(cluster.head.process.pid!, WORKER)).length === 1, 30_000);
    workers = await childrenRunning(cluster.head.process.pid!, WORKER);
  });
  after(async () => {
    await cluster?.stop();
  });

  test('hostile bodies are refused with their codes while normal inference keeps answering', async () => {
    const hostile: {
      what: string;
      method: string;
      path: string;
      body: Buffer | string;
      headers: Record<string, string>;
      check: (a: Answer) => void;
    }[] = [
      {
        what: 'a 60,000-key YAML spec (~800 KB)',
        method: 'PUT',
        path: '/api/v1/deployments/big',
        body: yamlKeys(60_000),
        headers: { 'content-type': 'application/yaml' },
        check: (a) => assertError(a, 413, 'TROUPE_ERR_SPEC_TOO_LARGE', /larger than 256 KiB/),
      },
      {
        what: 'a 20,000-key YAML spec under the size bound',
        method: 'PUT',
        path: '/api/v1/deployments/big',
        body: yamlKeys(20_000),
        headers: { 'content-type': 'application/yaml' },
        check: (a) => assertError(a, 413, 'TROUPE_ERR_SPEC_TOO_LARGE', /more than 2000 lines/),
      },
      {
        what: '13M empty BYTES strings (39 MB) to a float32 model',
        method: 'POST',
        path: '/v2/models/mlp/infer',
        body: emptyStrings(13_000_000, 'BYTES', [13_000_000]),
        headers: { 'content-type': 'application/json' },
        check: (a) => assertError(a, 413, 'TROUPE_ERR_TOO_MANY_ELEMENTS', /more than 4194304 values/),
      },
      {
        what: '1.28M empty strings declared FP32 [20000,64]',
        method: 'POST',
        path: '/v2/models/mlp/infer',
        body: emptyStrings(1_280_000, 'FP32', [20_000, 64]),
        headers: { 'content-type': 'application/json' },
        check: (a) => assertError(a, 400, 'TROUPE_ERR_BAD_TENSOR', /"data" holds strings, expected numbers for datatype FP32/),
      },
      {
        what: '1.28M empty strings declared BYTES [20000,64] (the model takes float32)',
        method: 'POST',
        path: '/v2/models/mlp/infer',
        body: emptyStrings(1_280_000, 'BYTES', [20_000, 64]),
        headers: { 'content-type': 'application/json' },
        check: (a) => assertError(a, 400, 'TROUPE_ERR_BAD_INPUT', /expected float32\[.*\], got string\[20000,64\]/),
      },
      {
        what: 'a declared shape of 2^40 x 64 elements',
        method: 'POST',
        path: '/v2/models/mlp/infer',
        body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2 ** 40, 64], data: [1, 2, 3] }] }),
        headers: { 'content-type': 'application/json' },
        check: (a) => assertError(a, 413, 'TROUPE_ERR_TOO_MANY_ELEMENTS', /declared elements/),
      },
    ];

    const load = normalLoad(cluster.url);
    try {
      for (const h of hostile) {
        const head = await headConnection(cluster.url);
        try {
          h.check(await head.send(h.method, h.path, h.body, h.headers));
        } finally {
          head.close();
        }
        h.check(await sender(cluster.url, false)(h.method, h.path, h.body, h.headers));
      }
    } finally {
      const seen = await load.stop();
      console.log(`normal inferences during hostile bodies: ${seen.calls}, max latency ${seen.maxMs.toFixed(1)} ms`);
      assert.ok(seen.calls > 10, `only ${seen.calls} normal inferences answered`);
      assert.deepEqual(seen.slow, [], `normal inferences slower than ${BOUND_MS} ms`);
    }

    // Nothing crashed: the head answers, and the same worker serves.
    assert.equal(cluster.head.process.exitCode, null);
    assert.deepEqual(await childrenRunning(cluster.head.process.pid!, WORKER), workers);
    const ok = await sender(cluster.url, false)('POST', '/v2/models/mlp/infer', normalBody, { 'content-type': 'application/json' });
    assert.equal(ok.status, 200);
  });

  test("/metrics carries the head's event-loop delay", async () => {
    const text = (await call(cluster.url, 'GET', '/metrics')).body.toString();
    for (const stat of ['p50', 'p99', 'max']) {
      const line = text.split('\n').find((l) => l.startsWith(`troupe_head_event_loop_delay_seconds{stat="${stat}"}`));
      assert.ok(line, `no ${stat} series in /metrics`);
      const value = Number(line.split(' ').pop());
      assert.ok(Number.isFinite(value) && value >= 0, line);
    }
  });
});
