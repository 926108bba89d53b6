import assert from 'node:assert/strict';
import { connect as tcpConnect } from 'node:net';
import type { Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { counter } from '../helpers/metrics.js';

/**
 * Request bodies are bounded as request heads are (docs/security.md): a connection is dropped to
 * make room at --max-connections until its whole request, body included, has come; a body that
 * stops arriving ends its connection after the silent-connection bound (10 s); and a connection
 * is handed to a replica only once its request head is whole, so the head's cap can still drop it.
 * Each path is tried where it is served: the head's own connections, a front-door worker's, and a
 * lone replica's (handoff).
 */
const clusters: TestCluster[] = [];
const sockets: Socket[] = [];
after(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(clusters.map((c) => c.stop()));
});

interface Conn {
  socket: Socket;
  closed: Promise<void>;
  isClosed: () => boolean;
  answered: Promise<string>;
}

function open(url: string): Promise<Conn> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host: hostname, port: Number(port) });
    sockets.push(socket);
    let closed = false;
    let text = '';
    const answered = new Promise<string>((r) =>
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1');
        if (text.includes('\r\n\r\n')) r(text);
      }),
    );
    const conn: Conn = {
      socket,
      closed: new Promise<void>((r) => socket.once('close', () => ((closed = true), r()))),
      isClosed: () => closed,
      answered,
    };
    socket.on('error', () => {});
    socket.once('connect', () => resolve(conn));
    socket.once('error', reject);
  });
}

/** Sends a whole head declaring a body of 1,000 bytes, and `sent` bytes of it; `expect`: asks for a 100 Continue first. */
function beginBody(conn: Conn, path: string, sent: number, expect = false): void {
  const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n${expect ? 'Expect: 100-continue\r\n' : ''}\r\n`;
  conn.socket.write(`${head}${'['.repeat(sent)}`);
}

/** Sends a byte of the body every 300 ms until the connection closes. */
function drip(conn: Conn): void {
  const timer = setInterval(() => (conn.isClosed() ? clearInterval(timer) : conn.socket.write('[')), 300);
  void conn.closed.then(() => clearInterval(timer));
}

/** A cluster with these head flags and the MLP deployed as its lone replica (which serves its HTTP itself). */
async function clusterWithMlp(headArgs: string[]): Promise<TestCluster> {
  const c = await startCluster({ headArgs });
  clusters.push(c);
  const client = await connect(c.url);
  try {
    await client.deploy({ name: 'mlp', model: 'mlp.onnx' });
  } finally {
    await client.close();
  }
  return c;
}

describe('slow request bodies', { timeout: 180_000 }, () => {
  test("on the head's own connections: a dripping body gives its place at the cap; a body that stops ends its connection", async () => {
    const c = await startCluster({ agents: [], headArgs: ['--max-connections', '10', '--http-workers', '0'] });
    clusters.push(c);
    // Nine clients that made a request and keep their connections: proven, never dropped for room.
    const kept: Conn[] = [];
    for (let i = 0; i < 9; i++) {
      const conn = await open(c.url);
      conn.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await conn.answered;
      kept.push(conn);
    }
    // The tenth sends a whole head, then its body a byte at a time: it is slow until the body is
    // whole. The head's 100 Continue says it has taken the head (a whole head used to prove it).
    const dripping = await open(c.url);
    beginBody(dripping, '/api/v1/deployments/none/jobs', 0, true);
    assert.match(await dripping.answered, /^HTTP\/1\.1 100 /);
    drip(dripping);
    // A new client at the cap takes the dripping connection's place and is served.
    const client = await open(c.url);
    client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const served = await Promise.race([client.answered, client.closed.then(() => 'closed by the head')]);
    assert.match(served, /^HTTP\/1\.1 200 /, 'the new client is served at the cap');
    await dripping.closed;
    assert.ok(!kept.some((k) => k.isClosed()), 'no client that sent a whole request was dropped');
    // A body that stops is dropped after the silent-connection bound, room or not.
    const stalled = await open(c.url);
    beginBody(stalled, '/api/v1/deployments/none/jobs', 10);
    await Promise.race([
      stalled.closed,
      new Promise((_, reject) => setTimeout(() => reject(new Error('a stalled body kept its connection for 60 s')), 60_000)),
    ]);
    for (const k of kept) k.socket.destroy();
  });

  test('on connections a front-door worker or a lone replica serves: a stalled body ends its connection; a head still coming waits off the event loop, then goes where a whole one goes', async () => {
    const c = await clusterWithMlp(['--http-workers', '1']);
    const handed = () => counter(c.url, 'troupe_http_handoffs_total', 'model="mlp"');
    const waiting = () => counter(c.url, 'troupe_head_connections', 'state="waiting"');
    // A request head that is not whole yet waits in the head's accept loop, handed to no one...
    const before = await handed();
    const slowHead = await open(c.url);
    slowHead.socket.write('POST /v2/models/mlp/infer HTTP/1.1\r\nX-Slow: a');
    await waitFor('the partial head to wait in the accept loop', async () => (await waiting()) === 1, 30_000, 50);
    // ...while a whole one goes to the replica at once.
    const whole = await open(c.url);
    whole.socket.write('POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[');
    await waitFor('a whole head handed to the replica', async () => (await handed()) === before + 1, 30_000, 100);
    assert.equal(await waiting(), 1, 'the partial head still waits');
    // Once whole, the slow head goes to the replica too, with nothing of it read by the head.
    slowHead.socket.write('\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[');
    await waitFor('the head, now whole, handed to the replica', async () => (await handed()) === before + 2, 30_000, 100);
    assert.equal(await waiting(), 0);
    // Both bodies stall: each connection ends after the silent bound in the replica.
    const bound = (conn: Conn) =>
      Promise.race([
        conn.closed,
        new Promise((_, reject) => setTimeout(() => reject(new Error("a stalled body kept its replica's connection for 60 s")), 60_000)),
      ]);
    await Promise.all([bound(slowHead), bound(whole)]);
    // A head that never becomes whole is closed after the silent bound, in the accept loop.
    const neverWhole = await open(c.url);
    neverWhole.socket.write('GET /healthz HTTP/1.1\r\nX-Slow: a');
    await bound(neverWhole);
    assert.equal(await waiting(), 0);
  });

  test("a replica's connection whose body drips is counted at --max-connections and gives its place to a new client", async () => {
    const c = await clusterWithMlp(['--http-workers', '1', '--max-connections', '6']);
    const handed = await counter(c.url, 'troupe_http_handoffs_total', 'model="mlp"');
    // An inference whose whole head goes to the lone replica, and whose body then drips.
    const dripping = await open(c.url);
    beginBody(dripping, '/v2/models/mlp/infer', 1);
    drip(dripping);
    await waitFor(
      'the dripping connection to be handed over',
      async () => (await counter(c.url, 'troupe_http_handoffs_total', 'model="mlp"')) === handed + 1,
    );
    // Clients that made a request and keep their connections, until the cap (which counts the
    // agent's and actor's links and the replica's connection too) refuses the next.
    const kept: Conn[] = [];
    const ask = async (): Promise<Conn | undefined> => {
      const conn = await open(c.url);
      conn.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      const answer = await Promise.race([conn.answered, conn.closed.then(() => '')]);
      return /^HTTP\/1\.1 200 /.test(answer) ? conn : undefined;
    };
    for (let conn = await ask(); conn; conn = await ask()) {
      kept.push(conn);
      assert.ok(kept.length < 50, 'the cap of 6 never refused a connection');
    }
    // Once the replica has said its connection is slow, a new client takes its place.
    await waitFor(
      'the dripping connection to give its place to a new client',
      async () => {
        if (dripping.isClosed()) return true;
        const probe = await ask();
        probe?.socket.destroy();
        return dripping.isClosed();
      },
      30_000,
      200,
    );
    assert.ok(!kept.some((k) => k.isClosed()), 'no client that sent a whole request was dropped');
    for (const k of kept) k.socket.destroy();
  });
});
