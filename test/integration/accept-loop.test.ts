import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { acceptAddon } from '../../runtime/handoff/accept-addon.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { counter } from '../helpers/metrics.js';
import { rawConnection } from '../helpers/raw-connection.js';
import type { RawConnection } from '../helpers/raw-connection.js';

/** The head's --max-connections here: as many connections may wait for their request heads. */
const CAP = 300;
/** Twice the cap, every one of them slow or silent; the test process stays under a soft limit of 1,024 descriptors. */
const SLOW = 2 * CAP;

/** An inference request's head after its first line, and its body. */
const INFERENCE_REST = 'Host: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}';

/** The first bytes of a slow connection: an inference's head, another route's, or nothing. */
const SLOW_STARTS = ['POST /v2/models/slow/infer HTTP/1.1\r\nX-Slow: ', 'GET / HTTP/1.1\r\nX-Slow: ', ''];

const skip = typeof acceptAddon() === 'string' ? `the accept addon is not built: ${acceptAddon() as string}` : false;

describe(
  'the head accepts off its event loop: a connection waits outside it until its request head is whole',
  { timeout: 170_000, skip },
  () => {
    let cluster: TestCluster;
    let port: number;
    const waiting = () => counter(cluster.url, 'troupe_head_connections', 'state="waiting"');

    before(async () => {
      cluster = await startCluster({ agents: [], headArgs: ['--max-connections', String(CAP), '--http-workers', '1'] });
      port = Number(new URL(cluster.url).port);
      // Until its worker is ready the head serves inference connections itself (Node's server, whose
      // header names are capitalised; the worker's are in lower case).
      await waitFor(
        'the front-door worker serving',
        async () => {
          const conn = await rawConnection(port);
          conn.socket.write(`POST /v2/models/warm-up/infer HTTP/1.1\r\n${INFERENCE_REST}`);
          return /\r\nconnection: close\r\n/.test(await conn.answer);
        },
        30_000,
        200,
      );
    });
    after(async () => {
      await cluster?.stop();
    });

    test(`${SLOW} slow or silent connections against --max-connections ${CAP}: the newest wait, the oldest are closed, the head answers, and the bytes of a head that completes are all read`, async () => {
      // Opened one after another, so the head accepts them in this order.
      const slow: RawConnection[] = [];
      for (let i = 0; i < SLOW; i++) {
        const conn = await rawConnection(port);
        conn.socket.write(SLOW_STARTS[i % SLOW_STARTS.length]!);
        slow.push(conn);
      }
      // At most the cap wait; a new one past it closed the one that had waited longest.
      await waitFor('the first half closed', async () => slow.slice(0, CAP).every((c) => c.isClosed()), 30_000, 50);
      const held = await waiting();
      const open = slow.filter((c) => !c.isClosed()).length;
      // The scrapes' own new connections at the cap may each have taken one waiting connection's place.
      assert.ok(held <= CAP && held >= CAP - 5, `connections waiting: ${held}, wanted about ${CAP}`);
      assert.equal(open, held, 'every slow connection still open is one the accept loop holds (none reached the event loop)');
      assert.ok(
        slow.slice(-(CAP - 5)).every((c) => !c.isClosed()),
        'the newest connections are the ones kept',
      );

      // A client with a whole request is served at the cap: the oldest waiting connection gives its place.
      const health = await call(cluster.url, 'GET', '/healthz', { headers: { connection: 'close' } });
      assert.equal(health.status, 200);

      // A waiting head that completes is served whole, none of its bytes lost to the wait: an
      // inference goes to the worker (404: no such model, its lower-case header names), another route
      // to the head's own server.
      const keptThatBegan = (start: number) => slow.find((c, i) => !c.isClosed() && i % SLOW_STARTS.length === start)!;
      const inference = keptThatBegan(0);
      const page = keptThatBegan(1);
      inference.socket.write(`1\r\n${INFERENCE_REST}`);
      page.socket.write('1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const [inferred, paged] = await Promise.all([inference.answer, page.answer]);
      assert.match(inferred, /^HTTP\/1\.1 404 /);
      assert.match(inferred, /\r\nconnection: close\r\n/, 'answered by the front-door worker');
      assert.match(inferred, /slow/, 'about the model its request line named');
      assert.match(paged, /^HTTP\/1\.1 200 /);
      assert.match(paged, /\r\nConnection: close\r\n/, "answered by the head's own server");

      for (const c of slow) c.socket.destroy();
      await waitFor('no connection waiting', async () => (await waiting()) === 0, 30_000, 50);
      assert.equal(cluster.head.process.exitCode, null, 'the head lives');
    });

    test('a head sent a byte at a time is served whole; bytes that are no request line get an answer at once', async () => {
      const dripped = await rawConnection(port);
      const request = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
      for (const byte of request) {
        dripped.socket.write(byte);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      assert.match(await dripped.answer, /^HTTP\/1\.1 200 /);

      // Not HTTP (a TLS client hello's first bytes): Node's parser answers 400 without waiting for a blank line.
      const tls = await rawConnection(port);
      tls.socket.write(Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01]));
      assert.match(await tls.answer, /^HTTP\/1\.1 400 /);

      // Two requests in one write: both answered, in order.
      const pipelined = await rawConnection(port);
      pipelined.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      assert.equal([...(await pipelined.answer).matchAll(/HTTP\/1\.1 200 /g)].length, 2);

      // A client that stops sending midway through its head is passed on as it is (Node answers, or closes).
      const halfClosed = await rawConnection(port);
      halfClosed.socket.end('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      await halfClosed.answer;
      await waitFor('no connection waiting', async () => (await waiting()) === 0, 30_000, 50);
    });
  },
);
