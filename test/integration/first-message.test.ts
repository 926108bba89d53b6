import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { startHead } from '../../head/index.js';
import type { Head } from '../../head/index.js';
import { connect, decodeFrame, encodeFrame } from '../../runtime/internal.js';

const BOUND_MS = 500;

/** Opens a raw WebSocket to `path`; resolves once open, with when (and how) it closed. */
async function open(head: Head, path: string): Promise<{ ws: WebSocket; closed: Promise<{ code: number; afterMs: number }> }> {
  const ws = new WebSocket(`${head.url.replace(/^http/, 'ws')}${path}`);
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const start = Date.now();
  const closed = new Promise<{ code: number; afterMs: number }>((resolve) =>
    ws.once('close', (code) => resolve({ code, afterMs: Date.now() - start })),
  );
  return { ws, closed };
}

const bounded = <T>(what: string, promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([
    promise,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms).unref()),
  ]);

/** A client or agent connection that says nothing is closed after a bound; one that says hello stays. */
describe('the first message on a connection is bounded in time', { timeout: 60_000 }, () => {
  let head: Head;
  before(async () => (head = await startHead({ port: 0, httpWorkers: 0, firstMessageTimeoutMs: BOUND_MS })));
  after(() => head?.close());

  for (const path of ['/v1/client', '/v1/agent']) {
    test(`a WebSocket to ${path} that sends nothing is closed (1008) within the bound`, async () => {
      const { closed } = await open(head, path);
      const { code, afterMs } = await bounded('the close', closed, BOUND_MS + 3000);
      assert.equal(code, 1008);
      assert.ok(afterMs >= BOUND_MS - 50, `closed after ${afterMs} ms`);
    });
  }

  test('a client that says hello is answered and kept past the bound', async () => {
    const { ws, closed } = await open(head, '/v1/client');
    const answer = new Promise<unknown[]>((resolve) => ws.once('message', (data: Buffer) => resolve(decodeFrame(data))));
    ws.send(encodeFrame([{ type: 'hello', id: 'h1' }]));
    assert.deepEqual(await bounded('the answer to hello', answer, 5000), [{ type: 'reply', id: 'h1', value: {} }]);
    const early = await Promise.race([closed, new Promise((resolve) => setTimeout(() => resolve('open'), BOUND_MS * 3))]);
    assert.equal(early, 'open');
    ws.close();
  });

  test('the SDK says hello on its own: an idle client is not dropped', async () => {
    const client = await connect(head.url, { reconnect: false });
    try {
      await new Promise((resolve) => setTimeout(resolve, BOUND_MS * 3));
      // Without reconnects, a dropped connection would fail this with CONNECTION_CLOSED.
      const view = await client.describe();
      assert.deepEqual(view.deployments, []);
    } finally {
      await client.close();
    }
  });
});
