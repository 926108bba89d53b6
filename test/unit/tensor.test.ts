import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DTYPES,
  DTYPE_NAMES,
  checkWire,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
  fromWire,
  tensor,
  toWire,
} from '../../runtime/internal.js';
import type { DType, TypedArray, WireTensor } from '../../runtime/internal.js';

const samples: Record<DType, () => ReturnType<typeof tensor>> = {
  float32: () => tensor('float32', [2, 3], Float32Array.from([1.5, -2, 3, 4, 5, 6])),
  float64: () => tensor('float64', [3], Float64Array.from([Math.PI, -0, 1e300])),
  float16: () => tensor('float16', [2], Uint16Array.from([0x3c00, 0xc000])),
  int8: () => tensor('int8', [3], Int8Array.from([-128, 0, 127])),
  uint8: () => tensor('uint8', [3], Uint8Array.from([0, 1, 255])),
  int16: () => tensor('int16', [2], Int16Array.from([-32768, 32767])),
  uint16: () => tensor('uint16', [2], Uint16Array.from([0, 65535])),
  int32: () => tensor('int32', [2, 1], Int32Array.from([-(2 ** 31), 2 ** 31 - 1])),
  uint32: () => tensor('uint32', [1], Uint32Array.from([2 ** 32 - 1])),
  int64: () => tensor('int64', [2], BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n])),
  uint64: () => tensor('uint64', [1], BigUint64Array.from([2n ** 64n - 1n])),
  bool: () => tensor('bool', [3], Uint8Array.from([1, 0, 1])),
  int4: () => tensor('int4', [3], Int8Array.from([0x12, 0x03])),
  uint4: () => tensor('uint4', [4], Uint8Array.from([0xff, 0x10])),
  string: () => tensor('string', [2], ['héllo', '']),
};

test('every onnxruntime-node dtype round-trips through a frame bit for bit', () => {
  assert.deepEqual(Object.keys(samples).sort(), [...DTYPE_NAMES].sort());
  for (const dtype of DTYPE_NAMES) {
    const t = samples[dtype]();
    // A 3-byte string first puts the tensor's bytes at an odd offset in the frame.
    const [, wire] = decodeFrame(encodeFrame(['abc', toWire(t)])) as [string, WireTensor];
    const back = fromWire(wire, dtype);
    assert.equal(back.dtype, dtype);
    assert.deepEqual(back.shape, t.shape);
    if (dtype === 'string') assert.deepEqual(back.data, t.data);
    else {
      assert.ok(back.data instanceof DTYPES[dtype].array!, dtype);
      assert.deepEqual([...(back.data as TypedArray)], [...(t.data as TypedArray)], dtype);
    }
  }
});

test('tensors travel as raw bytes, never JSON number arrays', () => {
  const wire = toWire(samples.float32());
  assert.ok(wire.data instanceof Uint8Array);
  assert.equal((wire.data as Uint8Array).byteLength, 24);
  // Zero-copy: the wire form shares the typed array's memory.
  const t = samples.float32();
  assert.equal((toWire(t).data as Uint8Array).buffer, (t.data as Float32Array).buffer);
});

test('aligned bytes are viewed, not copied', () => {
  const bytes = new Uint8Array(16);
  const view = fromWire({ dtype: 'float32', shape: [4], data: bytes }, 'x');
  assert.equal((view.data as Float32Array).buffer, bytes.buffer);
});

test('data length against shape is checked with a message naming the tensor', () => {
  assert.throws(() => checkWire({ dtype: 'float32', shape: [1, 64], data: new Uint8Array(252) }, "input 'x'"), {
    code: 'TROUPE_ERR_BAD_TENSOR',
    message: "input 'x': float32[1,64] needs 256 bytes, got 252",
  });
  assert.throws(() => checkWire({ dtype: 'string', shape: [3], data: ['a'] }, 's'), /needs 3 strings, got 1 strings/);
  assert.throws(() => checkWire({ dtype: 'int4', shape: [3], data: new Uint8Array(1) }, 'q'), /needs 2 bytes, got 1/);
  assert.throws(() => checkWire({ dtype: 'float32', shape: [Number.NaN], data: new Uint8Array(0) }, 'n'), /dims must be integers >= 0/);
  // A dim sent as a string is shown as one: "1" is not the number 1 the message would otherwise print.
  assert.throws(() => checkWire({ dtype: 'float32', shape: ['1', 64] as unknown as number[], data: new Uint8Array(256) }, "input 'x'"), {
    message: `input 'x': shape ["1",64] has "1", dims must be integers >= 0`,
  });
  assert.throws(() => checkWire({ dtype: 'float32', shape: new Array(17).fill(1), data: new Uint8Array(4) }, 'r'), /rank 17 exceeds/);
  assert.throws(() => tensor('float32', [2], new Int32Array(2)), /float32 data must be Float32Array, got Int32Array/);
});

test('large byte arrays travel outside the msgpack body and decode as views; small ones inline', () => {
  const big = new Uint8Array(100_000).map((_, i) => i % 251);
  const small = new Uint8Array([1, 2, 3]);
  const parts = encodeFrameParts([{ a: big, b: small, c: 'x' }, { d: big.subarray(5, 50_000) }]);
  assert.equal(parts.length, 3, 'body + two external arrays');
  assert.equal(parts[1], big, 'the array itself is sent, not a copy');
  const frame = Buffer.concat(parts);
  const [m1, m2] = decodeFrame(frame) as [{ a: Uint8Array; b: Uint8Array; c: string }, { d: Uint8Array }];
  assert.deepEqual([...m1.a], [...big]);
  assert.equal(m1.a.buffer, frame.buffer, 'a view into the received frame');
  assert.equal((m1.a.byteOffset - frame.byteOffset) % 8, 0, 'at a multiple of 8 in the frame: viewable as any typed array');
  assert.equal((m2.d.byteOffset - frame.byteOffset) % 8, 0, 'the second array too');
  assert.deepEqual([...m1.b], [1, 2, 3]);
  assert.equal(m1.c, 'x');
  assert.deepEqual([...m2.d], [...big.subarray(5, 50_000)]);
  assert.deepEqual(decodeFrame(encodeFrame([{ only: small }])), [{ only: Buffer.from([1, 2, 3]) }]);
});

test('forged split frames are refused as bad frames', () => {
  const parts = encodeFrameParts([{ a: new Uint8Array(20_000) }]);
  const truncated = Buffer.concat(parts).subarray(0, 100);
  assert.throws(() => decodeFrame(truncated), { code: 'TROUPE_ERR_BAD_FRAME' });
  // An external reference inside a plain frame has nothing to point at.
  const body = parts[0]!.subarray(5);
  assert.throws(() => decodeFrame(body), /external bytes outside a split frame/);
  assert.throws(() => decodeFrame(Uint8Array.from([0xc1, 0, 0, 0xff, 0xff, 0x90])), /beyond the frame/);
});
