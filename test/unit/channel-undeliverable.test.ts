import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { after, test } from 'node:test';
import { z } from 'zod';
import { Channel, FrameStream, TroupeError } from '../../runtime/internal.js';

/**
 * A message that cannot be sent (too deep to encode, larger than a frame) fails where it is
 * awaited, at once and with a code of its own; the other messages of its turn still go, and the
 * connection stays up (issue 39: a reply over the frame limit looked like a dead actor after 60 s).
 */

type Ask = { type: 'ask'; id: string; what: 'small' | 'large' | 'deep' };
const AskSchema = z.object({ type: z.literal('ask'), id: z.string(), what: z.enum(['small', 'large', 'deep']) });
const Replies = { ask: z.object({ value: z.unknown() }) };
type Nothing = { type: 'nothing' };
const NothingSchema = z.object({ type: z.literal('nothing') });
const LIMIT = 1 << 20;
const OPTIONS = { maxFrameBytes: LIMIT, pooled: false };

function nested(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

async function pair() {
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const asker = new Channel<Nothing, Ask | { type: 'ask'; id: string; what: Uint8Array }, typeof Replies>(
    await FrameStream.connect('127.0.0.1', port, { ...OPTIONS, timeoutMs: 10_000 }),
    { schema: NothingSchema, replies: Replies, maxFrameBytes: LIMIT, onMessage: () => {} },
  );
  const answerer: Channel<Ask, Nothing> = new Channel<Ask, Nothing>(FrameStream.adopt(await accepted, OPTIONS), {
    schema: AskSchema,
    maxFrameBytes: LIMIT,
    onMessage: (message) => {
      const value = message.what === 'large' ? new Uint8Array(2 * LIMIT) : message.what === 'deep' ? nested(100_000) : 'ok';
      answerer.reply(message.id, { value });
    },
  });
  after(() => {
    asker.terminate();
    answerer.terminate();
  });
  return asker;
}

const failsWith = (code: string, message: RegExp) => (err: unknown) => {
  assert.ok(err instanceof TroupeError, String(err));
  assert.equal(err.code, code);
  assert.match(err.message, message);
  return true;
};

test('an answer too large or too deep to send fails its own request at once; the others of its turn arrive', async () => {
  const asker = await pair();
  // Asked in one turn, so the answers leave in one turn too.
  const [large, small, deep, again] = [
    asker.request({ type: 'ask', what: 'large' }, 10_000),
    asker.request({ type: 'ask', what: 'small' }, 10_000),
    asker.request({ type: 'ask', what: 'deep' }, 10_000),
    asker.request({ type: 'ask', what: 'small' }, 10_000),
  ];
  await assert.rejects(
    large,
    failsWith('TROUPE_ERR_TOO_LARGE', /a 'reply' message of \d+ bytes is over the 1048576 bytes one frame may carry/),
  );
  await assert.rejects(deep, failsWith('TROUPE_ERR_UNSENDABLE_VALUE', /a message could not be encoded/));
  assert.deepEqual(await small, { value: 'ok' });
  assert.deepEqual(await again, { value: 'ok' });
  assert.deepEqual(await asker.request({ type: 'ask', what: 'small' }, 10_000), { value: 'ok' }, 'the connection stays up');
});

test('a request too large to send rejects without being sent', async () => {
  const asker = await pair();
  await assert.rejects(
    asker.request({ type: 'ask', what: new Uint8Array(2 * LIMIT) }, 10_000),
    failsWith('TROUPE_ERR_TOO_LARGE', /a 'ask' message of \d+ bytes is over the 1048576 bytes/),
  );
  assert.deepEqual(await asker.request({ type: 'ask', what: 'small' }, 10_000), { value: 'ok' });
});
