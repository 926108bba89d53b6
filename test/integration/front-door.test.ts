import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { connect as connectTcp } from 'node:net';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import type { NodeAnswer } from '../helpers/http.js';
import { childrenRunning } from '../helpers/processes.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';

const WORKER = 'front-door/worker-main';

/** The MLP's logits for `rows` rows of `x`, computed by onnxruntime in this process. */
async function expected(modelPath: string, x: Float32Array, rows: number): Promise<Float32Array> {
  const out = await runInProcess(modelPath, { x: tensor('float32', [rows, 64], x) });
  return out.logits!.data as Float32Array;
}

/**
 * A POST on a connection of its own: the head hands a connection to a worker by its first
 * request, and fetch would reuse one that began with another route (then the head serves it).
 */
function postFresh(base: string, path: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<NodeAnswer> {
  return nodeCall(base, 'POST', path, { body, headers });
}

/** Requests over one kept-alive connection (an agent with one socket), and the sockets they used. */
function keptAlive(base: string): {
  send: (method: string, path: string, body?: Buffer, headers?: Record<string, string>) => Promise<NodeAnswer>;
  sockets: Set<unknown>;
  close: () => void;
} {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<unknown>();
  const send = async (method: string, path: string, body?: Buffer, headers: Record<string, string> = {}) => {
    const answer = await nodeCall(base, method, path, { ...(body === undefined ? {} : { body }), headers, agent });
    sockets.add(answer.socket);
    return answer;
  };
  return { send, sockets, close: () => agent.destroy() };
}

/** Requests answered by the front-door workers so far, by outcome, from the head's /metrics. */
async function frontDoorCount(url: string, outcome = 'ok'): Promise<number> {
  const text = (await call(url, 'GET', '/metrics')).body.toString();
  const line = text.split('\n').find((l) => l.startsWith(`troupe_front_door_requests_total{model="mlp",outcome="${outcome}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Raw HTTP responses off one socket, in order: status, headers and body by Content-Length. */
function readResponses(socket: Socket, count: number): Promise<{ status: number; headers: Record<string, string>; body: Buffer }[]> {
  return new Promise((resolve, reject) => {
    let pending = Buffer.alloc(0);
    const out: { status: number; headers: Record<string, string>; body: Buffer }[] = [];
    const timer = setTimeout(() => reject(new Error(`only ${out.length} of ${count} responses within 60 s`)), 60_000);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const [statusLine, ...lines] = pending.subarray(0, end).toString('latin1').split('\r\n');
        const headers = Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        );
        const length = Number(headers['content-length'] ?? 0);
        if (pending.length < end + 4 + length) return;
        out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: pending.subarray(end + 4, end + 4 + length) });
        pending = pending.subarray(end + 4 + length);
        if (out.length === count) {
          clearTimeout(timer);
          resolve(out);
        }
      }
    });
    socket.on('error', reject);
  });
}

describe('front door: inference-protocol connections served by worker processes', { timeout: 170_000 }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '2', '--max-body-mib', '2', '--no-http-handoff'] });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1, batch: { maxSize: 8 } }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    await waitFor('two front-door workers', async () => (await childrenRunning(cluster.head.process.pid!, WORKER)).length === 2, 30_000);
  });
  after(async () => {
    await cluster?.stop();
  });

  test("workers answer small and large bodies, JSON and binary, with onnxruntime's numbers", async () => {
    const before = await frontDoorCount(cluster.url);
    let sent = 0;
    for (const rows of [1, 3, 1024]) {
      const x = seededFloats(rows * 64, rows);
      const want = await expected(cluster.models.mlp, x, rows);
      const { body, headers } = mlpBinaryRequest(x, rows);
      const binary = await postFresh(cluster.url, '/v2/models/mlp/infer', body, headers);
      assert.equal(binary.status, 200, binary.body.toString());
      assertClose(floatsOf(binary.body.subarray(Number(binary.headers['inference-header-content-length']))), want, `binary, ${rows} rows`);
      const json = await postFresh(
        cluster.url,
        '/v2/models/mlp/infer',
        JSON.stringify({ inputs: [{ name: 'x', shape: [rows, 64], datatype: 'FP32', data: Array.from(x) }] }),
        { 'content-type': 'application/json' },
      );
      assert.equal(json.status, 200, json.body.toString());
      assertClose((json.json as { outputs: { data: number[] }[] }).outputs[0]!.data, want, `JSON, ${rows} rows`);
      sent += 2;
    }
    // The workers, not the head, answered them (they report their counts twice a second).
    await waitFor('the workers to report what they served', async () => (await frontDoorCount(cluster.url)) >= before + sent, 10_000);
  });

  test('a kept-alive connection that turns to other routes goes back to the head and keeps working', async () => {
    const { send, sockets, close } = keptAlive(cluster.url);
    const x = seededFloats(4 * 64, 11);
    const want = await expected(cluster.models.mlp, x, 4);
    const { body, headers } = mlpBinaryRequest(x, 4);
    try {
      const first = await send('POST', '/v2/models/mlp/infer', body, headers);
      assert.equal(first.status, 200);
      const meta = await send('GET', '/v2/models/mlp');
      assert.equal(meta.status, 200, meta.body.toString());
      assert.equal((JSON.parse(meta.body.toString()) as { name: string }).name, 'mlp');
      const list = await send('GET', '/api/v1/deployments');
      assert.equal(list.status, 200);
      const again = await send('POST', '/v2/models/mlp/infer', body, headers);
      assert.equal(again.status, 200);
      const length = Number(again.headers['inference-header-content-length']);
      assertClose(floatsOf(again.body.subarray(length)), want, 'inference after the connection went back to the head');
      assert.equal(sockets.size, 1, 'one kept-alive connection throughout');
    } finally {
      close();
    }
  });

  test("health and metadata first, then inference, on one connection (as Triton's clients do): the worker keeps it", async () => {
    const { send, sockets, close } = keptAlive(cluster.url);
    const before = await frontDoorCount(cluster.url);
    try {
      assert.equal((await send('GET', '/v2/health/live')).status, 200);
      assert.equal((await send('GET', '/v2/models/mlp/ready')).status, 200);
      const meta = await send('GET', '/v2/models/mlp');
      assert.equal(meta.status, 200);
      assert.deepEqual((JSON.parse(meta.body.toString()) as { inputs: unknown[] }).inputs, [
        { name: 'x', datatype: 'FP32', shape: [-1, 64] },
      ]);
      assert.equal((await send('GET', '/v2/models/nope')).status, 404);
      const x = seededFloats(2 * 64, 17);
      const { body, headers } = mlpBinaryRequest(x, 2);
      for (let i = 0; i < 3; i++) {
        const answer = await send('POST', '/v2/models/mlp/infer', body, headers);
        assert.equal(answer.status, 200, answer.body.toString());
        assertClose(
          floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))),
          await expected(cluster.models.mlp, x, 2),
          `inference ${i}`,
        );
      }
      assert.equal(sockets.size, 1, 'one kept-alive connection throughout');
    } finally {
      close();
    }
    await waitFor('the worker to report the three inferences', async () => (await frontDoorCount(cluster.url)) >= before + 3, 10_000);
  });

  test('pipelined requests are answered in order, on one connection', async () => {
    const url = new URL(cluster.url);
    const socket = connectTcp(Number(url.port), url.hostname);
    try {
      const inputs = [1, 2, 3].map((seed) => seededFloats(64 * seed, seed));
      const requests = inputs.map((x, i) => {
        const { body, headers } = mlpBinaryRequest(x, i + 1);
        const head = [
          `POST /v2/models/mlp/infer HTTP/1.1`,
          `host: ${url.host}`,
          `content-length: ${body.length}`,
          ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
        ].join('\r\n');
        return Buffer.concat([Buffer.from(`${head}\r\n\r\n`), body]);
      });
      const answers = readResponses(socket, 4);
      // Every request in one write, and a health check behind them that the head answers.
      socket.write(Buffer.concat([...requests, Buffer.from(`GET /v2/health/live HTTP/1.1\r\nhost: ${url.host}\r\n\r\n`)]));
      const responses = await answers;
      for (const [i, x] of inputs.entries()) {
        const r = responses[i]!;
        assert.equal(r.status, 200, r.body.toString());
        const length = Number(r.headers['inference-header-content-length']);
        assertClose(floatsOf(r.body.subarray(length)), await expected(cluster.models.mlp, x, i + 1), `pipelined request ${i}`);
      }
      assert.equal(responses[3]!.status, 200, 'the health check after them');
    } finally {
      socket.destroy();
    }
  });

  test('chunked bodies, Expect: 100-continue, and the errors the head gives', async () => {
    const url = new URL(cluster.url);
    const x = seededFloats(5 * 64, 5);
    const want = await expected(cluster.models.mlp, x, 5);
    const { body, headers } = mlpBinaryRequest(x, 5);
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');

    const chunkedSocket = connectTcp(Number(url.port), url.hostname);
    const chunked = readResponses(chunkedSocket, 1);
    const half = Math.floor(body.length / 2);
    chunkedSocket.write(`POST /v2/models/mlp/infer HTTP/1.1\r\nhost: ${url.host}\r\ntransfer-encoding: chunked\r\n${extra}\r\n`);
    for (const part of [body.subarray(0, half), body.subarray(half)])
      chunkedSocket.write(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    chunkedSocket.write('0\r\n\r\n');
    const [c] = await chunked;
    chunkedSocket.destroy();
    assert.equal(c!.status, 200, c!.body.toString());
    assertClose(floatsOf(c!.body.subarray(Number(c!.headers['inference-header-content-length']))), want, 'chunked body');

    const expectSocket = connectTcp(Number(url.port), url.hostname);
    const continued = readResponses(expectSocket, 2);
    expectSocket.write(
      `POST /v2/models/mlp/infer HTTP/1.1\r\nhost: ${url.host}\r\nexpect: 100-continue\r\ncontent-length: ${body.length}\r\n${extra}\r\n`,
    );
    // The body only after the 100 (the reader sees it as a response of its own).
    const interim = await new Promise<string>((resolve) => expectSocket.once('data', (d: Buffer) => resolve(d.toString('latin1'))));
    assert.match(interim, /^HTTP\/1\.1 100 Continue\r\n\r\n/);
    expectSocket.write(body);
    const final = (await continued).at(-1)!;
    expectSocket.destroy();
    assert.equal(final.status, 200, final.body.toString());
    assertClose(
      floatsOf(final.body.subarray(Number(final.headers['inference-header-content-length']))),
      want,
      'body sent after 100 Continue',
    );

    assertError(
      await postFresh(cluster.url, '/v2/models/nope/infer', '{}'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /^unknown model 'nope'$/,
    );
    assertError(await postFresh(cluster.url, '/v2/models/mlp/infer', '{"inputs": ['), 400, 'TROUPE_ERR_BAD_REQUEST', /not valid JSON/);
    assertError(
      await postFresh(cluster.url, '/v2/models/mlp/infer', Buffer.alloc(3 * 2 ** 20)),
      413,
      'TROUPE_ERR_BODY_TOO_LARGE',
      /--max-body-mib/,
    );
    const wrongShape = mlpBinaryRequest(seededFloats(64, 1), 2);
    assertError(
      await postFresh(cluster.url, '/v2/models/mlp/infer', wrongShape.body, wrongShape.headers),
      400,
      'TROUPE_ERR_BAD_TENSOR',
      /needs 512 bytes, got 256/,
    );

    const garbage = connectTcp(Number(url.port), url.hostname);
    const refused = readResponses(garbage, 1);
    garbage.write('POST /v2/models/mlp/infer HTTP/1.1\r\ncontent-length: 12abc\r\n\r\n');
    const [bad] = await refused;
    garbage.destroy();
    assert.ok(bad!.status >= 400 && bad!.status < 500, `a malformed request gets a 4xx, got ${bad!.status}`);
  });

  test('a request right after a deploy finds the new model', async () => {
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp2', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    const x = seededFloats(64, 3);
    const { body, headers } = mlpBinaryRequest(x, 1);
    const answer = await postFresh(cluster.url, '/v2/models/mlp2/infer', body, headers);
    assert.equal(answer.status, 200, answer.body.toString());
    assertClose(
      floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))),
      await expected(cluster.models.mlp, x, 1),
      'the new deployment',
    );
    assert.equal((await call(cluster.url, 'DELETE', '/api/v1/deployments/mlp2')).status, 200);
    assertError(
      await postFresh(cluster.url, '/v2/models/mlp2/infer', body, headers),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /unknown model 'mlp2'/,
    );
  });

  test('hostile bytes on a worker connection are refused and crash nothing', async () => {
    const workers = (await childrenRunning(cluster.head.process.pid!, WORKER)).sort();
    const url = new URL(cluster.url);
    const start = 'POST /v2/models/mlp/infer HTTP/1.1\r\nhost: x\r\n';
    const random = Buffer.from(seededFloats(2048, 5).buffer);
    const hostile: (string | Buffer)[] = [
      `${start}content-length: -5\r\n\r\n`,
      `${start}content-length: 99999999999999999999\r\n\r\n`,
      `${start}content-length: 5\r\ncontent-length: 6\r\n\r\nabcdef`,
      `${start}transfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n`,
      `${start}transfer-encoding: chunked\r\n\r\nffffffffffffff\r\nabc`,
      `${start}transfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\n`,
      `${start}transfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
      `${start}no colon on this line\r\n\r\n`,
      `${start}x-big: ${'a'.repeat(20_000)}\r\n\r\n`,
      Buffer.concat([Buffer.from(start), random]),
      `${start}content-length: 100\r\n\r\n{"inputs": [`,
      `POST /v2/models/%zz/infer HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}`,
      `${start}content-length: 2\r\n\r\n{}GARBAGE AFTER A WHOLE REQUEST\r\n\r\n`,
    ];
    for (const bytes of hostile) {
      const socket = connectTcp(Number(url.port), url.hostname);
      socket.on('error', () => {});
      socket.write(bytes);
      // Whatever comes back (answers, or a closed connection), within a bound.
      let received = '';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 3000);
        socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
        socket.once('close', () => (clearTimeout(timer), resolve()));
        socket.once('end', () => (clearTimeout(timer), resolve()));
      });
      socket.destroy();
      for (const [, status] of received.matchAll(/HTTP\/1\.[01] (\d{3})/g)) {
        assert.match(status!, /^4\d\d$/, `${String(bytes).slice(0, 80)}: answered ${status}`);
      }
    }
    assert.deepEqual((await childrenRunning(cluster.head.process.pid!, WORKER)).sort(), workers, 'no worker died');
    const x = seededFloats(64, 21);
    const { body, headers } = mlpBinaryRequest(x, 1);
    const answer = await postFresh(cluster.url, '/v2/models/mlp/infer', body, headers);
    assert.equal(answer.status, 200, answer.body.toString());
    assertClose(
      floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))),
      await expected(cluster.models.mlp, x, 1),
      'after the hostile bytes',
    );
  });

  test('a worker that dies is replaced, and inference goes on', async () => {
    const workers = await childrenRunning(cluster.head.process.pid!, WORKER);
    assert.equal(workers.length, 2);
    process.kill(workers[0]!, 'SIGKILL');
    await waitFor(
      'a new worker in the dead one’s place',
      async () => {
        const now = await childrenRunning(cluster.head.process.pid!, WORKER);
        return now.length === 2 && !now.includes(workers[0]!);
      },
      30_000,
    );
    const x = seededFloats(64, 9);
    const want = await expected(cluster.models.mlp, x, 1);
    const { body, headers } = mlpBinaryRequest(x, 1);
    // Each on a connection of its own, so the head hands them out afresh.
    for (let i = 0; i < 6; i++) {
      const answer = await postFresh(cluster.url, '/v2/models/mlp/infer', body, headers);
      assert.equal(answer.status, 200, answer.body.toString());
      assertClose(
        floatsOf(answer.body.subarray(Number(answer.headers['inference-header-content-length']))),
        want,
        `after the restart, request ${i}`,
      );
    }
  });
});

describe('front door: shutting down', { timeout: 60_000 }, () => {
  test('a connection that never sends a byte does not hold up the head’s exit', async () => {
    const cluster = await startCluster({ headArgs: ['--http-workers', '1', '--no-http-handoff'] });
    try {
      const url = new URL(cluster.url);
      const silent = connectTcp(Number(url.port), url.hostname);
      silent.on('error', () => {});
      await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
      const exited = cluster.head.exited;
      cluster.head.process.kill('SIGTERM');
      // The head waits 60 s for a connection's first bytes; its shutdown must not.
      const outcome = await Promise.race([
        exited.then(() => 'exited'),
        new Promise((resolve) => setTimeout(() => resolve('still running'), 20_000)),
      ]);
      silent.destroy();
      assert.equal(outcome, 'exited');
    } finally {
      await cluster.stop();
    }
  });

  test('a head that handed connections to its workers exits on SIGTERM without waiting out the drain', async () => {
    // A drain bound far beyond the wait below: only a shutdown that finishes by itself passes.
    const cluster = await startCluster({ headArgs: ['--http-workers', '1', '--drain-ms', '600000', '--no-http-handoff'] });
    try {
      // Answered by the worker the connection was handed to; the client has closed it by the time the head stops.
      assertError(await postFresh(cluster.url, '/v2/models/nope/infer', '{}'), 404, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /nope/);
      const exited = cluster.head.exited;
      cluster.head.process.kill('SIGTERM');
      const outcome = await Promise.race([
        exited.then(() => 'exited'),
        new Promise((resolve) => setTimeout(() => resolve('still running'), 20_000)),
      ]);
      assert.equal(outcome, 'exited');
      assert.equal(cluster.head.process.exitCode, 0);
    } finally {
      await cluster.stop();
    }
  });
});
