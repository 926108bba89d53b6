import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { after, test } from 'node:test';
import { BufferPool, FrameStream } from '../../runtime/internal.js';
import type { FrameSink, TroupeError } from '../../runtime/internal.js';
import { FrameReader } from '../../runtime/transport/frame-reader.js';
import { lengthPrefixed } from '../helpers/raw-stream.js';

const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
/** Bytes that differ from frame to frame and from position to position. */
const patterned = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7) & 0xff);

/** A sink that records what it is given. */
function recorder() {
  const frames: { bytes: Buffer; release: (() => void) | undefined }[] = [];
  const refused: TroupeError[] = [];
  let closed: [number, string] | undefined;
  const sink: FrameSink = {
    frame: (bytes, release) => frames.push({ bytes, release }),
    refused: (error) => refused.push(error),
    closed: (code, reason) => (closed = [code, reason]),
  };
  return { sink, frames, refused, closed: () => closed };
}

test('the reader cuts frames out of a stream whatever the read boundaries, through scratch and in place', () => {
  const sizes = [1, 7, 4096, 70_000, 600_000, 3, 2_000_000, 65_535, 65_536];
  const frames = sizes.map((n, i) => patterned(n, i));
  const stream = Buffer.concat(frames.map(lengthPrefixed));
  for (const chunk of [1, 3, 1000, 65_536, 100_000]) {
    const got: Buffer[] = [];
    const reader = new FrameReader(8 << 20, undefined);
    reader.handlers = { onFrame: (f) => got.push(Buffer.from(f)), onError: (e) => assert.fail(e.message) };
    // As a socket with `onread` does: each read lands where the reader says, up to `chunk` bytes.
    for (let at = 0; at < stream.length;) {
      const target = reader.nextBuffer();
      const n = Math.min(chunk, target.length, stream.length - at);
      target.set(stream.subarray(at, at + n));
      reader.read(n, target);
      at += n;
    }
    assert.deepEqual(got.map(digest), frames.map(digest), `reads of ${chunk} bytes`);
  }
  // And fed as Node's own chunks (sockets that cannot read in place).
  const got: Buffer[] = [];
  const reader = new FrameReader(8 << 20, undefined);
  reader.handlers = { onFrame: (f) => got.push(Buffer.from(f)), onError: (e) => assert.fail(e.message) };
  for (let at = 0; at < stream.length; at += 12_345) reader.consume(stream.subarray(at, at + 12_345));
  assert.deepEqual(got.map(digest), frames.map(digest));
});

test('a pooled frame released is the buffer of a later frame; one still held is not', () => {
  const pool = new BufferPool();
  const reader = new FrameReader(8 << 20, pool);
  const got: { bytes: Buffer; release: (() => void) | undefined }[] = [];
  reader.handlers = { onFrame: (bytes, release) => got.push({ bytes, release }), onError: (e) => assert.fail(e.message) };
  for (let i = 0; i < 3; i++) reader.consume(lengthPrefixed(patterned(600_000, i)));
  const [a, b] = got;
  assert.ok(a!.bytes.buffer !== b!.bytes.buffer, 'two frames held at once have their own buffers');
  a!.release!();
  a!.release!();
  // 700 KB is in the same 1 MiB size class as the 600 KB frame released.
  reader.consume(lengthPrefixed(patterned(700_000, 9)));
  reader.consume(lengthPrefixed(patterned(700_000, 8)));
  assert.ok(got[3]!.bytes.buffer === a!.bytes.buffer, 'the released buffer came back for the next frame of its size class');
  assert.ok(got[4]!.bytes.buffer !== a!.bytes.buffer, 'released twice, handed out once');
  assert.equal(digest(got[3]!.bytes), digest(patterned(700_000, 9)));
  // Small frames are plain allocations, and giving them back does nothing.
  reader.consume(lengthPrefixed(patterned(100, 1)));
  got.at(-1)!.release!();
  assert.equal(pool.retainedBytes, 0);
});

test("the pool keeps only buffers it allocated: never Node's slab (64 KiB on Node 24, one of the pool's sizes)", () => {
  const pool = new BufferPool();
  // A small buffer: a slice of Node's slab, whatever its size on this line.
  pool.give(pool.take(100));
  // A slice of a 64 KiB ArrayBuffer from elsewhere, as Node 24's slab is, and a whole 1 MiB one.
  pool.give(Buffer.allocUnsafeSlow(64 * 1024).subarray(0, 100));
  pool.give(Buffer.allocUnsafeSlow(1 << 20));
  assert.equal(pool.retainedBytes, 0, 'buffers the pool did not make are not kept');
  pool.give(pool.take(1 << 20));
  assert.equal(pool.retainedBytes, 1 << 20, 'a buffer the pool made is');
});

test('the pool keeps at most its limit, and only whole buffers of its own size classes', () => {
  const pool = new BufferPool(2 << 20);
  const taken = [pool.take(1 << 20), pool.take(1 << 20), pool.take(1 << 20)];
  assert.ok(taken.every((b) => b.length === 1 << 20));
  for (const b of taken) pool.give(b);
  assert.equal(pool.retainedBytes, 2 << 20, 'the third was dropped');
  pool.give(Buffer.alloc(1 << 20).subarray(0, 5000));
  pool.give(new Uint8Array(3000));
  assert.equal(pool.retainedBytes, 2 << 20, 'foreign and odd-sized buffers are not kept');
  assert.ok(pool.take(700_000).buffer === taken[1]!.buffer, 'a request takes a kept buffer of its class');
});

test('the pool lets go of a size class nobody took from for a while, and keeps one in use', async () => {
  const pool = new BufferPool(8 << 20, 40);
  const idle = pool.take(1 << 20);
  const busy = pool.take(64 << 10);
  pool.give(idle);
  pool.give(busy);
  assert.equal(pool.retainedBytes, (1 << 20) + (64 << 10));
  // Past two sweeps the idle class is gone; the busy one, taken and given back meanwhile, stays.
  for (let i = 0; i < 6; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const again = pool.take(60_000);
    assert.ok(again.buffer === busy.buffer, 'the busy class hands out its kept buffer');
    pool.give(again);
  }
  assert.equal(pool.retainedBytes, 64 << 10, 'only the class in use is kept');
  assert.ok(pool.take(900_000).buffer !== idle.buffer, 'the idle class was let go');
});

test('an empty or oversized frame stops the reader with BAD_FRAME', () => {
  for (const length of [0, 1025]) {
    const errors: TroupeError[] = [];
    const reader = new FrameReader(1024, undefined);
    reader.handlers = { onFrame: () => assert.fail('no frame'), onError: (e) => errors.push(e) };
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(length);
    reader.consume(Buffer.concat([prefix, Buffer.alloc(2000), lengthPrefixed(Buffer.from('x'))]));
    assert.equal(errors.length, 1);
    assert.equal(errors[0]!.code, 'TROUPE_ERR_BAD_FRAME');
    assert.match(errors[0]!.message, length === 0 ? /empty frame/ : /1025 bytes, over the limit of 1024/);
  }
});

test('a frame whose buffer cannot be allocated stops the reader with BAD_FRAME instead of throwing', () => {
  // The allocator refusing, as it does in a process short of memory (here for every size class).
  class ExhaustedPool extends BufferPool {
    override take(bytes: number): Buffer {
      throw new RangeError(`Array buffer allocation failed (${bytes} bytes)`);
    }
  }
  const errors: TroupeError[] = [];
  const reader = new FrameReader(256 << 20, new ExhaustedPool());
  reader.handlers = { onFrame: () => assert.fail('no frame'), onError: (e) => errors.push(e) };
  reader.consume(lengthPrefixed(Buffer.alloc(100_000)));
  assert.equal(errors.length, 1);
  assert.equal(errors[0]!.code, 'TROUPE_ERR_BAD_FRAME');
  assert.match(errors[0]!.message, /frame of 100000 bytes, which this process cannot allocate \(Array buffer allocation failed/);
});

let server: Server | undefined;
after(() => server?.close());

test('over real sockets: an accepted socket reads in place, frames of every size cross both ways intact, and closes are reported', async () => {
  const accepted: FrameStream[] = [];
  server = createServer({ pauseOnConnect: true }, (socket) =>
    accepted.push(FrameStream.adopt(socket, { maxFrameBytes: 8 << 20, pooled: true })),
  );
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const client = await FrameStream.connect('127.0.0.1', port, { maxFrameBytes: 8 << 20, pooled: false, timeoutMs: 5000 });
  const toServer = recorder();
  const toClient = recorder();
  client.start(toClient.sink);
  for (let i = 0; i < 100 && accepted.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  const remote = accepted[0]!;
  // Node offers in-place reads to accepted sockets only through the handle moved in FrameStream.adopt:
  // if a Node release changes that, this says so instead of silently costing the copies again.
  assert.equal(remote.readsInPlace, true, 'the accepted socket reads in place');
  remote.start(toServer.sink);

  const sizes = [1, 5, 16_384, 600_000, 65_536, 3_000_000, 64];
  // Each frame sent as several parts, as the channel sends a body and its tensors.
  for (const [i, n] of sizes.entries()) {
    const bytes = patterned(n, i);
    client.send([bytes.subarray(0, n >> 1), bytes.subarray(n >> 1)]);
    remote.send([bytes]);
  }
  const until = async (done: () => boolean) => {
    for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  };
  await until(() => toServer.frames.length === sizes.length && toClient.frames.length === sizes.length);
  const want = sizes.map((n, i) => digest(patterned(n, i)));
  assert.deepEqual(
    toServer.frames.map((f) => digest(f.bytes)),
    want,
  );
  assert.deepEqual(
    toClient.frames.map((f) => digest(f.bytes)),
    want,
  );
  assert.ok(
    toServer.frames.filter((f) => f.bytes.length >= 16_384).every((f) => f.release),
    'large frames to the pooled end can be released',
  );
  assert.ok(
    toClient.frames.every((f) => !f.release),
    'frames to an unpooled end are theirs to keep',
  );

  client.close(1000, 'done');
  await until(() => toServer.closed() !== undefined && toClient.closed() !== undefined);
  assert.deepEqual(toClient.closed(), [1000, 'done']);
  assert.equal(toServer.closed()![0], 1000, 'the peer saw an orderly end');
});

test('connecting to a port nobody listens on, or with an aborted signal, rejects', async () => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  await assert.rejects(FrameStream.connect('127.0.0.1', port, { maxFrameBytes: 1024, pooled: false, timeoutMs: 5000 }), /ECONNREFUSED/);
  await assert.rejects(
    FrameStream.connect('127.0.0.1', port, { maxFrameBytes: 1024, pooled: false, timeoutMs: 5000, signal: AbortSignal.abort() }),
    /abort/i,
  );
});
