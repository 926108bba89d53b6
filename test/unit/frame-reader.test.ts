import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { BufferPool } from '../../runtime/transport/buffer-pool.js';
import { FrameReader } from '../../runtime/transport/frame-reader.js';

function prefixed(body: Buffer): Buffer {
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(body.length);
  return Buffer.concat([prefix, body]);
}

/** Feeds `bytes` as a socket reading in place would: into nextBuffer(), at most `step` bytes a read. */
function feedInPlace(reader: FrameReader, bytes: Buffer, step: number): void {
  let at = 0;
  while (at < bytes.length) {
    const target = reader.nextBuffer();
    const n = Math.min(target.length, step, bytes.length - at);
    target.set(bytes.subarray(at, at + n));
    reader.read(n, target);
    at += n;
  }
}

test('a frame longer than its first part grows as its bytes arrive and arrives whole, in place or in chunks', () => {
  for (const pooled of [true, false]) {
    for (const feed of ['in place', 'chunks'] as const) {
      const reader = new FrameReader(64 * 2 ** 20, pooled ? new BufferPool() : undefined);
      const frames: Buffer[] = [];
      reader.handlers = { onFrame: (f) => frames.push(Buffer.from(f)), onError: (e) => assert.fail(e.message) };
      const bodies = [randomBytes(600 * 1024), randomBytes(5 * 2 ** 20 + 3), randomBytes(17)];
      const stream = Buffer.concat(bodies.map(prefixed));
      if (feed === 'in place') feedInPlace(reader, stream, 200_000);
      else for (let at = 0; at < stream.length; at += 70_001) reader.consume(stream.subarray(at, at + 70_001));
      assert.equal(frames.length, 3, `${feed}, pooled ${pooled}`);
      frames.forEach((f, i) => assert.ok(f.equals(bodies[i]!), `frame ${i} ${feed}, pooled ${pooled}`));
    }
  }
});

test('a declared frame whose bytes have not come holds a buffer the size of what came, not what was declared', () => {
  const reader = new FrameReader(256 * 2 ** 20, new BufferPool());
  reader.handlers = { onFrame: () => assert.fail('no frame'), onError: (e) => assert.fail(e.message) };
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(200 * 2 ** 20);
  reader.consume(prefix);
  assert.ok(reader.nextBuffer().length <= 2 ** 20, `first part ${reader.nextBuffer().length} bytes`);
  feedInPlace(reader, Buffer.alloc(2 ** 20 + 1), 2 ** 20);
  assert.ok(reader.nextBuffer().length < 4 * 2 ** 20, 'grown 4x, not to the declared length');
});
