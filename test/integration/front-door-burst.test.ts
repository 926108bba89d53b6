import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { handoffAddon } from '../../runtime/handoff/addon.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';
import { childrenRunning } from '../helpers/processes.js';
import { rawConnection } from '../helpers/raw-connection.js';

const WORKER = 'front-door/worker-main';
/**
 * Past what the kernel buffers on a worker's handoff socket at once (a few hundred descriptors), so
 * some wait in the head; each process holds fewer descriptors than a soft limit of 1,024.
 */
const BURST = 700;

/**
 * A worker's answer: the worker's server (runtime/http/in-place-connection.ts) writes its header
 * names in lower case, Node's HTTP server in the head as `Connection`.
 */
const fromWorker = (answer: string) => /\r\nconnection: close\r\n/.test(answer);

const request = (model: string) =>
  `POST /v2/models/${model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`;

const skip = typeof handoffAddon() === 'string' ? `the handoff addon is not built: ${handoffAddon() as string}` : false;

describe('a burst of new connections handed to a front-door worker', { timeout: 170_000, skip }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ agents: [], headArgs: ['--max-connections', String(2 * BURST), '--http-workers', '1'] });
    await waitFor('a front-door worker', async () => (await childrenRunning(cluster.head.process.pid!, WORKER)).length === 1, 30_000);
    // Until its worker is ready the head serves such connections itself.
    const port = Number(new URL(cluster.url).port);
    await waitFor(
      'the worker serving',
      async () => {
        const { socket, answer } = await rawConnection(port);
        socket.write(request('warm-up'));
        return fromWorker(await answer);
      },
      30_000,
    );
  });
  after(async () => {
    await cluster?.stop();
  });

  test(`${BURST} connections at once, each asking for a model of its own name: each is answered about its own, the head lives`, async () => {
    const port = Number(new URL(cluster.url).port);
    // Every connection open first, then every request written at once: the head reads them in one
    // burst, and the descriptors wait for room on the worker's handoff socket while the bytes read
    // of each go in the head's messages; an answer that named another connection's model would
    // show the two apart.
    const connections = await Promise.all(Array.from({ length: BURST }, () => rawConnection(port)));
    connections.forEach(({ socket }, i) => socket.write(request(`burst-${i}`)));
    const answers = await Promise.all(connections.map(({ answer }) => answer));
    const wrong = answers.flatMap((answer, i) => {
      const named = [...answer.matchAll(/burst-(\d+)/g)].map((m) => Number(m[1]));
      return /^HTTP\/1\.1 404 /.test(answer) && fromWorker(answer) && named.length > 0 && named.every((n) => n === i)
        ? []
        : [{ i, answer: answer.slice(0, 300) }];
    });
    assert.deepEqual(
      wrong.slice(0, 5),
      [],
      `${wrong.length} of ${BURST} connections were not answered by the worker about their own model`,
    );
    assert.equal((await call(cluster.url, 'GET', '/healthz', { timeoutMs: 10_000 })).status, 200);
    assert.equal(cluster.head.process.exitCode, null);
  });

  test('connections waiting for a worker that dies are served by the head, each about its own request; none is answered wrongly', async () => {
    const port = Number(new URL(cluster.url).port);
    const [worker] = await childrenRunning(cluster.head.process.pid!, WORKER);
    assert.ok(worker, 'a front-door worker');
    // Stopped, the worker takes no descriptor: its handoff socket fills and the rest wait in the head.
    process.kill(worker, 'SIGSTOP');
    try {
      const connections = await Promise.all(Array.from({ length: BURST }, () => rawConnection(port)));
      connections.forEach(({ socket }, i) => socket.write(request(`gone-${i}`)));
      // The head read the burst before a request that came after it (it is the head's, not a worker's).
      assert.equal((await call(cluster.url, 'GET', '/healthz', { timeoutMs: 10_000 })).status, 200);
      process.kill(worker, 'SIGKILL');
      const answers = await Promise.all(connections.map(({ answer }) => answer));
      // Those queued in the dead worker's socket close unanswered, as any worker's connections do;
      // those that waited in the head are served by it: about their own model, or, forwarded to the
      // worker as it died, a retryable 503 saying so. None is answered about another's.
      const byHead = answers.filter((answer) => answer !== '' && !fromWorker(answer));
      const wrong = answers.flatMap((answer, i) => {
        if (answer === '') return [];
        const own = [...answer.matchAll(/gone-(\d+)/g)].every((m) => Number(m[1]) === i);
        const honest =
          /^HTTP\/1\.1 404 /.test(answer) ||
          (/^HTTP\/1\.1 503 /.test(answer) && answer.includes('TROUPE_ERR_CONNECTION_CLOSED') && answer.includes('went away'));
        return own && honest ? [] : [{ i, answer: answer.slice(0, 300) }];
      });
      assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} of ${BURST} connections were answered wrongly`);
      assert.ok(byHead.length > 0, `the waiting connections were served by the head (${byHead.length} of ${BURST})`);
    } finally {
      try {
        process.kill(worker, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    assert.equal((await call(cluster.url, 'GET', '/healthz', { timeoutMs: 10_000 })).status, 200);
    assert.equal(cluster.head.process.exitCode, null);
  });
});
