import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { acceptBuffers, bodyBuffer } from '../../head/http/body.js';
import { BodyBudget } from '../../head/http/body-budget.js';
import { rawConnection } from '../helpers/raw-connection.js';

/** Past the bodies the head parses inline, so each takes a buffer of its own and a place in the budget. */
const BODY = 80 * 1024;

const head = `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${BODY}\r\nConnection: close\r\n\r\n`;
const body = (fill: number) => Buffer.alloc(BODY, fill);
/** Whether an ask of `bytes` would start now (it is withdrawn at once either way). */
function startsNow(budget: BodyBudget, bytes: number): boolean {
  let started = false;
  budget.take(bytes, () => (started = true))();
  return started;
}

/** Waits for `check`, checking every 5 ms, up to 10 s. */
async function until(what: string, check: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !check(); await new Promise((r) => setTimeout(r, 5)))
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
}

describe('acceptBuffers: large bodies read a budget at a time, through a real HTTP server', () => {
  // Room for one body at a time, and no bound on the wait, so the order shows.
  const budget = new BodyBudget(BODY + 1024, 60_000);
  let app: FastifyInstance;
  let port: number;

  before(async () => {
    app = Fastify();
    acceptBuffers(app, 1024 * 1024, budget);
    app.post('/echo', async (request) => {
      const bytes = bodyBuffer(request.body);
      return { length: bytes.length, fill: bytes[0], same: bytes.every((b) => b === bytes[0]) };
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as { port: number }).port;
  });
  after(() => app.close());

  test('a body waits, unread, while another holds the budget; one whose client leaves while it waits gives its place back; every answer is its own body, whole', async () => {
    // A holds the budget: its head and half its body, then nothing.
    const a = await rawConnection(port);
    a.socket.write(head);
    a.socket.write(body(1).subarray(0, BODY / 2));
    await until('A to hold the budget', () => !startsNow(budget, BODY));
    // B sends all of its body, and waits for the budget, unread and unanswered.
    const b = await rawConnection(port);
    b.socket.write(head);
    b.socket.write(body(2));
    await until('B to wait for the budget', () => !startsNow(budget, 1));
    assert.equal(b.isClosed(), false);
    // C sends its head and leaves while it waits.
    const c = await rawConnection(port);
    c.socket.write(head);
    a.socket.write(body(1).subarray(BODY / 2));
    const aAnswer = await a.answer;
    assert.ok(aAnswer.endsWith('{"length":81920,"fill":1,"same":true}'), aAnswer);
    c.socket.destroy();
    const bAnswer = await b.answer;
    assert.ok(bAnswer.endsWith('{"length":81920,"fill":2,"same":true}'), bAnswer);
    // C's place was given back: D is read and answered.
    const d = await rawConnection(port);
    d.socket.write(head);
    d.socket.write(body(4));
    const dAnswer = await d.answer;
    assert.ok(dAnswer.endsWith('{"length":81920,"fill":4,"same":true}'), dAnswer);
    // And the whole budget is free again: a new ask starts at once.
    await until('the budget to be free', () => startsNow(budget, BODY + 1024));
  });

  test('a body shorter than its Content-Length gives its place back when its client leaves', async () => {
    const short = await rawConnection(port);
    short.socket.write(head);
    short.socket.write(body(5).subarray(0, 1000));
    await new Promise((r) => setTimeout(r, 50));
    short.socket.destroy();
    const next = await rawConnection(port);
    next.socket.write(head);
    next.socket.write(body(6));
    assert.ok((await next.answer).endsWith('{"length":81920,"fill":6,"same":true}'));
  });
});
