import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { rssOf } from '../helpers/chaos-cluster.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call, nodeCall } from '../helpers/http.js';
import { childrenRunning } from '../helpers/processes.js';

/**
 * Inference bodies are parsed off the head's event loop whichever connection carries them: a
 * kept-alive connection whose first request was GET /healthz stays with the head, and its later
 * 60 MB JSON inferences once were parsed there (14 of them took the head to 3 GB and held /healthz
 * for 10 s). The head now passes them on to a front-door worker; /healthz answers throughout.
 */

const WORKER = 'front-door/worker-main';
const CONNECTIONS = 14;

const SMALL = JSON.stringify({ inputs: [{ name: 'x', shape: [1, 64], datatype: 'FP32', data: new Array(64).fill(0.5) }] });

/** ~60 MB of JSON: 3.9M numbers declared as a [1, 64] tensor, so the answer (a 400) comes once it was all parsed. */
function hugeBody(): Buffer {
  const values = 3_900_000;
  const data = '0.123456789012,'.repeat(values - 1) + '0.123456789012';
  return Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,64],"data":[${data}]}]}`);
}

describe("large inference bodies on the head's own connections", { timeout: 170_000 }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ headArgs: ['--http-workers', '1'] });
    const put = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(put.status, 201, put.body.toString());
    await waitFor('a front-door worker', async () => (await childrenRunning(cluster.head.process.pid!, WORKER)).length === 1, 30_000);
  });
  after(async () => {
    await cluster?.stop();
  });

  /**
   * Runs `each` on CONNECTIONS kept-alive connections that asked /healthz first, while another
   * polls /healthz; prints its latencies and the head's RSS (measured, not asserted: CI is busy).
   */
  async function whilePolled(what: string, each: (agent: Agent) => Promise<void>): Promise<void> {
    const headPid = cluster.head.process.pid!;
    const rssBefore = await rssOf(headPid);
    let polling = true;
    const healthz: number[] = [];
    const probe = new Agent({ keepAlive: true, maxSockets: 1 });
    const poller = (async () => {
      while (polling) {
        const started = performance.now();
        const answer = await nodeCall(cluster.url, 'GET', '/healthz', { agent: probe, timeoutMs: 10_000 });
        assert.equal(answer.status, 200);
        healthz.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssOf(headPid).then(
        (rss) => (rssPeak = Math.max(rssPeak, rss)),
        () => {},
      );
    }, 100);
    const agents: Agent[] = [];
    try {
      await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          const agent = new Agent({ keepAlive: true, maxSockets: 1 });
          agents.push(agent);
          // The connection is the head's: its first request is no inference.
          assert.equal((await nodeCall(cluster.url, 'GET', '/healthz', { agent, timeoutMs: 30_000 })).status, 200);
          await each(agent);
        }),
      );
    } finally {
      polling = false;
      await poller;
      clearInterval(sampler);
      probe.destroy();
      for (const agent of agents) agent.destroy();
    }
    const sorted = [...healthz].sort((a, b) => a - b);
    console.log(
      `/healthz during ${CONNECTIONS} x ${what}: ${healthz.length} polls, ` +
        `p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms; ` +
        `head RSS ${(rssBefore / 2 ** 20).toFixed(0)} MB before, peak ${(rssPeak / 2 ** 20).toFixed(0)} MB`,
    );
    assert.ok(healthz.length > 0);
    assert.equal(cluster.head.process.exitCode, null);
  }

  test(`${CONNECTIONS} connections that asked /healthz first, then sent 60 MB JSON inferences: answered by a worker; /healthz answers throughout`, async () => {
    const body = hugeBody();
    await whilePolled(`${(body.length / 2 ** 20).toFixed(0)} MB inferences on head connections`, async (agent) => {
      const answer = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        agent,
        body,
        headers: { 'content-type': 'application/json' },
        timeoutMs: 120_000,
      });
      assertError(answer, 400, 'TROUPE_ERR_BAD_TENSOR', /data/);
      // The connection still serves: a small inference on it answers.
      const ok = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        agent,
        body: SMALL,
        headers: { 'content-type': 'application/json' },
        timeoutMs: 30_000,
      });
      assert.equal(ok.status, 200, ok.body.toString());
    });
    // A body past the limit, on a connection of the head's: refused (413) by the worker, and the connection closes.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.equal((await nodeCall(cluster.url, 'GET', '/healthz', { agent, timeoutMs: 30_000 })).status, 200);
      const tooLarge = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/infer', {
        agent,
        body: Buffer.alloc(65 * 2 ** 20, 0x20),
        headers: { 'content-type': 'application/json' },
        timeoutMs: 60_000,
      }).catch((err: Error) => err);
      // The head may close before the whole body is written; either way no other answer comes.
      if (!(tooLarge instanceof Error)) assertError(tooLarge, 413, 'TROUPE_ERR_BODY_TOO_LARGE', /larger than/);
      assert.equal((await call(cluster.url, 'GET', '/healthz')).status, 200);
    } finally {
      agent.destroy();
    }
  });

  test(`${CONNECTIONS} 60 MB JSON job bodies are parsed on a thread of their own; /healthz answers throughout`, async () => {
    const body = hugeBody();
    await whilePolled(`${(body.length / 2 ** 20).toFixed(0)} MB job bodies`, async (agent) => {
      const answer = await nodeCall(cluster.url, 'POST', '/api/v1/deployments/mlp/jobs', {
        agent,
        body,
        headers: { 'content-type': 'application/json' },
        timeoutMs: 120_000,
      });
      assertError(answer, 400, 'TROUPE_ERR_BAD_TENSOR', /data/);
    });
    const job = await call(cluster.url, 'POST', '/api/v1/deployments/mlp/jobs', {
      body: SMALL,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(job.status, 202, job.body.toString());
  });

  test(`${CONNECTIONS} 7 MB generate bodies are parsed and converted on the body thread; /healthz answers throughout`, async () => {
    // 1.1M numbers (7.7 MB) for an input of 64 elements: refused once parsed and converted (off the event loop).
    const data = '0.1234,'.repeat(1_100_000 - 1) + '0.1234';
    const body = Buffer.from(`{"x": [${data}]}`);
    await whilePolled(`${(body.length / 2 ** 20).toFixed(1)} MB generate bodies`, async (agent) => {
      const answer = await nodeCall(cluster.url, 'POST', '/v2/models/mlp/generate', {
        agent,
        body,
        headers: { 'content-type': 'application/json' },
        timeoutMs: 120_000,
      });
      assert.equal(answer.status, 400, answer.body.toString());
      assert.match(String((JSON.parse(answer.body.toString()) as { code: string }).code), /^TROUPE_ERR_BAD_(TENSOR|INPUT)$/);
    });
    // A large body that is valid (padded past the size parsed on the event loop) answers from the thread's tensors.
    const padded = `{"id": "big", "x": [${new Array(64).fill(0.5).join(',')}]${' '.repeat(200 * 1024)}}`;
    for (const route of ['generate', 'generate_stream']) {
      const ok = await call(cluster.url, 'POST', `/v2/models/mlp/${route}`, {
        body: padded,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(ok.status, 200, ok.body.toString());
      assert.match(ok.body.toString(), /"id":"big"/);
      assert.match(ok.body.toString(), /"model_name":"mlp"/);
    }
    const bad = await call(cluster.url, 'POST', '/v2/models/mlp/generate', {
      body: `{"nope": 1${' '.repeat(200 * 1024)}}`,
      headers: { 'content-type': 'application/json' },
    });
    assertError(bad, 400, 'TROUPE_ERR_BAD_INPUT', /no input 'nope'/);
  });

  test('a connection that says nothing, or never finishes its request head, is closed after about 10 s (docs/security.md)', async () => {
    const { hostname, port } = new URL(cluster.url);
    const closedAfter = async (first: string | undefined) => {
      const socket = netConnect(Number(port), hostname);
      await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      const started = performance.now();
      if (first !== undefined) socket.write(first);
      socket.on('data', () => {});
      socket.on('error', () => {});
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      const bound = new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), 40_000).unref());
      const outcome = await Promise.race([closed.then(() => 'closed' as const), bound]);
      socket.destroy();
      return { outcome, ms: performance.now() - started };
    };
    const [silent, partial] = await Promise.all([closedAfter(undefined), closedAfter('GET /healthz HTTP/1.1\r\nHost: x\r\n')]);
    console.log(`silent connection closed after ${silent.ms.toFixed(0)} ms; half a request head after ${partial.ms.toFixed(0)} ms`);
    assert.equal(silent.outcome, 'closed');
    assert.equal(partial.outcome, 'closed');
  });
});

/** GET /healthz on a new connection, closed after: the answer's text, or '' if the head closed it unanswered. */
async function freshHealthz(host: string, port: number): Promise<string> {
  const socket = netConnect(port, host);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  const bound = setTimeout(() => socket.destroy(), 10_000);
  await new Promise<void>((resolve) => socket.once('close', () => resolve()));
  clearTimeout(bound);
  return Buffer.concat(chunks).toString('latin1');
}

describe('slowloris sockets that open with an inference request line (a front-door worker holds them)', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  const CAP = 30;

  before(async () => {
    cluster = await startCluster({ agents: [], headArgs: ['--max-connections', String(CAP), '--http-workers', '1'] });
    await waitFor('a front-door worker', async () => (await childrenRunning(cluster.head.process.pid!, WORKER)).length === 1, 30_000);
  });
  after(async () => {
    await cluster?.stop();
  });

  test(`${CAP + 20} slowloris sockets, each reopened as it closes, against --max-connections ${CAP}: /healthz answers, and every one is closed (docs/security.md: 10 s)`, async () => {
    const { hostname, port } = new URL(cluster.url);
    let attacking = true;
    const opened: Socket[] = [];
    // One slot of the attack: a socket that sends an inference request line (so a worker holds it)
    // and then a header byte every 2 s, never finishing its head; when it closes, another takes its place.
    const slot = (): void => {
      if (!attacking) return;
      const socket = netConnect(Number(port), hostname);
      opened.push(socket);
      socket.on('error', () => {});
      socket.on('data', () => {});
      socket.once('connect', () => socket.write('POST /v2/models/m/infer HTTP/1.1\r\nX-Slow: '));
      const drip = setInterval(() => socket.write('a'), 2000);
      socket.once('close', () => {
        clearInterval(drip);
        setTimeout(slot, 50);
      });
    };
    for (let i = 0; i < CAP + 20; i++) slot();
    try {
      // Workers report what they hold every half second: soon the cap is full of slow sockets, and
      // a new connection must take one's place rather than be refused. Each poll on a connection of
      // its own (a kept-alive one, once admitted, would prove nothing).
      for (let i = 0; i < 20; i++) {
        assert.match(await freshHealthz(hostname, Number(port)), /^HTTP\/1\.1 200 /, `/healthz poll ${i}`);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      // Bounded wait for the condition, not a timing: with no more reopened, each slow socket is
      // closed (made room, or timed out) while still sending its byte every 2 s.
      attacking = false;
      await waitFor('every slow socket to be closed', () => opened.every((socket) => socket.destroyed), 40_000, 250);
      assert.ok(opened.length > CAP + 20, `slow sockets were closed to make room (${opened.length} opened)`);
      assert.equal((await call(cluster.url, 'GET', '/healthz', { timeoutMs: 10_000 })).status, 200);
      assert.equal(cluster.head.process.exitCode, null);
    } finally {
      attacking = false;
      for (const socket of opened) socket.destroy();
    }
  });
});
