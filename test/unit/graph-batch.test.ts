import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchSize, chunkBounds, concatRows, fromWire, sliceRows, tensor, toWire } from '../../runtime/internal.js';

test('chunkBounds cuts rows into chunks with a ragged last one', () => {
  assert.deepEqual(chunkBounds(10, 4), [
    [0, 4],
    [4, 8],
    [8, 10],
  ]);
  assert.deepEqual(chunkBounds(4, 4), [[0, 4]]);
  assert.deepEqual(chunkBounds(0, 4), []);
});

test('sliceRows shares the bytes; concatRows puts chunks back in order', () => {
  const w = toWire(
    tensor(
      'float32',
      [5, 2],
      Float32Array.from({ length: 10 }, (_, i) => i),
    ),
  );
  const parts = chunkBounds(5, 2).map(([s, e]) => sliceRows(w, s, e, 'x'));
  assert.deepEqual(
    parts.map((p) => p.shape),
    [
      [2, 2],
      [2, 2],
      [1, 2],
    ],
  );
  assert.equal((parts[1]!.data as Uint8Array).buffer, (w.data as Uint8Array).buffer, 'a chunk is a view, not a copy');
  const back = fromWire(concatRows(parts, 'x'), 'x');
  assert.deepEqual(back.shape, [5, 2]);
  assert.deepEqual(
    [...(back.data as Float32Array)],
    Array.from({ length: 10 }, (_, i) => i),
  );
  const strings = concatRows(
    [
      sliceRows(toWire(tensor('string', [3], ['a', 'b', 'c'])), 0, 2, 's'),
      sliceRows(toWire(tensor('string', [3], ['a', 'b', 'c'])), 2, 3, 's'),
    ],
    's',
  );
  assert.deepEqual(strings.data, ['a', 'b', 'c']);
});

test('inputs must agree on the batch size; outputs must agree to be concatenated', () => {
  const a = toWire(tensor('float32', [3, 1], new Float32Array(3)));
  const b = toWire(tensor('float32', [2, 1], new Float32Array(2)));
  assert.equal(batchSize({ a }, 'dp'), 3);
  assert.throws(() => batchSize({ a, b }, 'dp'), /dp: inputs disagree on the batch size: 'a' has 3 rows, 'b' has 2/);
  assert.throws(() => batchSize({}, 'dp'), /no inputs/);
  assert.throws(
    () => concatRows([a, toWire(tensor('float32', [1, 2], new Float32Array(2)))], 'y'),
    /chunk 1 gave float32\[1,2\] but chunk 0 gave float32\[3,1\]/,
  );
  assert.throws(() => sliceRows(toWire(tensor('int4', [2, 1], Int8Array.of(0))), 0, 1, 'q'), /do not end on whole bytes/);
});
