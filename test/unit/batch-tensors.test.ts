import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rowsOf } from '../../actors/batch-tensors.js';
import { BufferPool, concatTensorRows, decodeFrame, encodeFrame, fromWire, splitRows, tensor, toWire } from '../../runtime/internal.js';
import type { Tensor } from '../../runtime/internal.js';

const rows = (t: Tensor) => [...(t.data as Float32Array)];
const pool = new BufferPool();
const join = (parts: Tensor[]) => concatTensorRows(parts, pool).tensor;

test('calls that came in one frame are batched as a view over its bytes, without a copy', () => {
  const calls = [1, 2, 3].map((k) => toWire(tensor('float32', [1, 4], new Float32Array(4).fill(k))));
  // As the actor receives them: one frame, each tensor viewed in place (large ones travel after the body).
  const big = [1, 2, 3].map((k) => toWire(tensor('float32', [1, 8192], new Float32Array(8192).fill(k))));
  const received = (decodeFrame(encodeFrame(big.map((inputs) => ({ inputs })))) as { inputs: (typeof big)[0] }[]).map((m) =>
    fromWire(m.inputs, 'x'),
  );
  const viewed = concatTensorRows(received, pool);
  assert.equal(viewed.copy, undefined, 'nothing to give back');
  const batch = viewed.tensor;
  assert.deepEqual(batch.shape, [3, 8192]);
  assert.equal((batch.data as Float32Array).buffer, (received[0]!.data as Float32Array).buffer, 'shares the frame buffer');
  assert.deepEqual(
    [0, 8191, 8192, 16383, 16384, 24575].map((i) => (batch.data as Float32Array)[i]),
    [1, 1, 2, 2, 3, 3],
  );

  // Tensors from separate buffers are copied, in order, into a new one.
  const { tensor: copied, copy } = concatTensorRows(
    calls.map((w) => fromWire(w, 'x')),
    pool,
  );
  assert.equal((copied.data as Float32Array).buffer, copy?.buffer, 'the copy is the buffer to give back');
  assert.deepEqual(copied.shape, [3, 4]);
  assert.notEqual((copied.data as Float32Array).buffer, (calls[0]!.data as Uint8Array).buffer);
  assert.deepEqual(rows(copied), [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
  // Out of order in one buffer is not back to back: copied, not viewed.
  const whole = new Float32Array([1, 1, 2, 2]);
  const swapped = join([tensor('float32', [1, 2], whole.subarray(2)), tensor('float32', [1, 2], whole.subarray(0, 2))]);
  assert.deepEqual(rows(swapped), [2, 2, 1, 1]);
  assert.deepEqual(splitRows(copied, [1, 2]).map(rows), [
    [1, 1, 1, 1],
    [2, 2, 2, 2, 3, 3, 3, 3],
  ]);
});

test('int64 calls from one frame are viewed as one batch too; 4-bit calls are never batched', () => {
  const parts = [5n, 6n].map((k) => toWire(tensor('int64', [1, 4096], new BigInt64Array(4096).fill(k))));
  const received = (decodeFrame(encodeFrame(parts.map((inputs) => ({ inputs })))) as { inputs: (typeof parts)[0] }[]).map((m) =>
    fromWire(m.inputs, 'x'),
  );
  const batch = join(received);
  assert.ok(batch.data instanceof BigInt64Array);
  assert.equal(batch.data.buffer, (received[0]!.data as BigInt64Array).buffer);
  assert.deepEqual([batch.data[0], batch.data[4095], batch.data[4096], batch.data[8191]], [5n, 5n, 6n, 6n]);

  assert.equal(rowsOf({ x: tensor('float32', [3, 4], new Float32Array(12)) }), 3);
  assert.equal(rowsOf({ x: tensor('int4', [3, 3], new Int8Array(5)) }), null, 'rows of 4-bit values need not end on a byte');
  assert.equal(rowsOf({ x: tensor('float32', [3, 4], new Float32Array(12)), y: tensor('float32', [2, 4], new Float32Array(8)) }), null);
});
