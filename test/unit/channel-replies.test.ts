import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { after, test } from 'node:test';
import { z } from 'zod';
import { Channel, FrameStream, TroupeError } from '../../runtime/internal.js';

/** Requests the asking side sends; the answering side replies to `good` as promised and to `bad` with the wrong shape. */
type Ask = { type: 'good'; id: string; n: number } | { type: 'bad'; id: string };
const AskSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('good'), id: z.string(), n: z.number() }),
  z.object({ type: z.literal('bad'), id: z.string() }),
]);
const Replies = { good: z.object({ doubled: z.number() }), bad: z.object({ doubled: z.number() }) };
type Nothing = { type: 'nothing' };
const NothingSchema = z.object({ type: z.literal('nothing') });
const OPTIONS = { maxFrameBytes: 1 << 20, pooled: false };

/** A value `depth` arrays deep, built without recursion. */
function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** Two channels over a real loopback socket: `asker` requests, `answerer` replies (then runs `afterAnswer`, once the reply is written). */
async function pair(afterAnswer?: () => void) {
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const asker = new Channel<Nothing, Ask, typeof Replies>(await FrameStream.connect('127.0.0.1', port, { ...OPTIONS, timeoutMs: 10_000 }), {
    schema: NothingSchema,
    replies: Replies,
    onMessage: () => {},
  });
  const answerer: Channel<Ask, Nothing> = new Channel<Ask, Nothing>(FrameStream.adopt(await accepted, OPTIONS), {
    schema: AskSchema,
    onMessage: (message) => {
      // n = -1 asks for a reply no encoder can write (nested far past any stack).
      const value =
        message.type === 'bad' ? { doubled: 'two' } : message.n === -1 ? { doubled: nested(100_000) } : { doubled: message.n * 2 };
      answerer.reply(message.id, value);
      // The reply leaves in a microtask; an immediate runs after it has been written.
      if (afterAnswer) setImmediate(afterAnswer);
    },
  });
  after(() => {
    asker.terminate();
    answerer.terminate();
  });
  return asker;
}

test('a reply is checked against the schema paired with its request, and typed by it', async () => {
  const asker = await pair();
  const { doubled } = await asker.request({ type: 'good', n: 21 }, 10_000);
  assert.equal(doubled, 42);
  await assert.rejects(asker.request({ type: 'bad' }, 10_000), (err: unknown) => {
    assert.ok(err instanceof TroupeError);
    assert.equal(err.code, 'TROUPE_ERR_BAD_MESSAGE');
    assert.match(err.message, /the reply to 'bad' is invalid at 'doubled'/);
    return true;
  });
  // The channel stays usable after a malformed reply.
  assert.deepEqual(await asker.request({ type: 'good', n: 1 }, 10_000), { doubled: 2 });
});

test('an answer that arrived while the process stalled past the deadline is taken, not timed out', async () => {
  const TIMEOUT_MS = 1000;
  let deadline = 0;
  // The process stalls (as a head busy placing thousands of actors does) until the request's
  // timer is due, with the answer already waiting in the socket: when the loop runs again, the
  // timer comes before the read.
  const asker = await pair(() => {
    while (performance.now() <= deadline + 20);
  });
  deadline = performance.now() + TIMEOUT_MS;
  assert.deepEqual(await asker.request({ type: 'good', n: 4 }, TIMEOUT_MS), { doubled: 8 });
});

test('a message that cannot be encoded fails its own call, on either side, and the channel carries on', async () => {
  const asker = await pair();
  // A reply the answering side cannot encode becomes a fail for that request; the rest of its
  // batch (the other reply) still leaves, and no exception escapes the microtask that flushes.
  const [bad, good] = await Promise.allSettled([
    asker.request({ type: 'good', n: -1 }, 10_000),
    asker.request({ type: 'good', n: 3 }, 10_000),
  ]);
  assert.equal(bad.status, 'rejected');
  assert.ok(bad.reason instanceof TroupeError, String(bad.reason));
  assert.match(bad.reason.message, /message 'reply' cannot be encoded/);
  assert.deepEqual(good.status === 'fulfilled' && good.value, { doubled: 6 });
  // A request this side cannot encode rejects here, at once.
  await assert.rejects(asker.request({ type: 'good', n: nested(100_000) as number }, 10_000), (err: unknown) => {
    assert.ok(err instanceof TroupeError);
    assert.match(err.message, /message 'good' cannot be encoded/);
    return true;
  });
  assert.deepEqual(await asker.request({ type: 'good', n: 5 }, 10_000), { doubled: 10 });
});
