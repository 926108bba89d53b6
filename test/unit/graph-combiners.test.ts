import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TroupeError, argmax, combineOutputs, concat, groupOutputs, max, mean, tensor, vote } from '../../runtime/internal.js';

const t = (shape: number[], values: number[]) => tensor('float32', shape, Float32Array.from(values));
const values = (x: { data: unknown }) => [...(x.data as Float32Array)];

test('mean and weighted mean accumulate in float64 and round once; inputs are not mutated', () => {
  const a = t([2, 2], [1, 2, 3, 4]);
  const b = t([2, 2], [3, 2, 1, 0]);
  assert.deepEqual(values(mean([a, b])), [2, 2, 2, 2]);
  assert.deepEqual(values(mean([a, b], [3, 1])), [1.5, 2, 2.5, 3]);
  assert.deepEqual(values(a), [1, 2, 3, 4]);
  const f64 = mean([tensor('float64', [1], Float64Array.of(0.1)), tensor('float64', [1], Float64Array.of(0.2))]);
  assert.equal(f64.dtype, 'float64');
  assert.equal((f64.data as Float64Array)[0], (0.1 + 0.2) / 2);
  assert.throws(() => mean([tensor('int32', [1], Int32Array.of(1))]), /mean needs float32 or float64 tensors, got int32/);
});

test('max is element-wise, works on integers, and lets NaN win', () => {
  assert.deepEqual(values(max([t([3], [1, 5, NaN]), t([3], [2, 4, 0])])).map(String), ['2', '5', 'NaN']);
  const ints = max([tensor('int64', [2], BigInt64Array.of(1n, -5n)), tensor('int64', [2], BigInt64Array.of(-1n, 7n))]);
  assert.deepEqual([...(ints.data as BigInt64Array)], [1n, 7n]);
});

test('argmax takes the first of equal maxima and never picks NaN', () => {
  assert.equal(argmax(Float32Array.of(1, 3, 3), 0, 3), 1);
  assert.equal(argmax(Float32Array.of(NaN, 0, -1), 0, 3), 1);
  assert.equal(argmax(Float32Array.of(9, 9, 0, 5), 2, 2), 1);
});

test('vote: majority of argmaxes per row, ties to the lower class, int64 without the class axis', () => {
  const a = t([2, 3], [0.9, 0.1, 0, /* row 2 */ 0, 1, 0]);
  const b = t([2, 3], [0.2, 0.8, 0, /* row 2 */ 0, 0, 1]);
  const c = t([2, 3], [0.7, 0.3, 0, /* row 2 */ 1, 0, 0]);
  const out = vote([a, b, c]);
  assert.equal(out.dtype, 'int64');
  assert.deepEqual(out.shape, [2]);
  assert.deepEqual([...(out.data as BigInt64Array)], [0n, 0n]); // row 2 is a three-way tie -> class 0
  assert.throws(() => vote([t([], [1])]), /vote needs a class axis/);
});

test('concat along any axis, negative axes from the end', () => {
  const a = t([2, 2], [1, 2, 3, 4]);
  const b = t([2, 1], [9, 8]);
  assert.deepEqual(concat([a, b], 1).shape, [2, 3]);
  assert.deepEqual(values(concat([a, b], -1)), [1, 2, 9, 3, 4, 8]);
  assert.deepEqual(values(concat([a, t([1, 2], [5, 6])], 0)), [1, 2, 3, 4, 5, 6]);
  assert.throws(() => concat([a, b], 0), /cannot combine member 1 float32\[2,1\] with member 0 float32\[2,2\]/);
  assert.throws(() => concat([a], 2), /concat axis 2 is outside a rank-2 tensor/);
});

test('groupOutputs: one output each, or the same names from all', () => {
  assert.deepEqual(
    groupOutputs([
      { name: 'a', outputs: ['logits'] },
      { name: 'b', outputs: ['probs'] },
    ]),
    [{ name: 'logits', sources: ['logits', 'probs'] }],
  );
  assert.deepEqual(
    groupOutputs([
      { name: 'a', outputs: ['p', 'q'] },
      { name: 'b', outputs: ['q', 'p'] },
    ]),
    [
      { name: 'p', sources: ['p', 'p'] },
      { name: 'q', sources: ['q', 'q'] },
    ],
  );
  assert.match(
    String(
      groupOutputs([
        { name: 'a', outputs: ['p', 'q'] },
        { name: 'b', outputs: ['p'] },
      ]),
    ),
    /member 'b' gives p but member 'a' gives p, q/,
  );
});

test('combineOutputs names the member and output that do not fit, with TROUPE_ERR_BAD_SPEC', () => {
  const out = combineOutputs({ op: 'mean' }, [
    { name: 'a', outputs: { y: t([1], [1]) } },
    { name: 'b', outputs: { z: t([1], [3]) } },
  ]);
  assert.deepEqual(Object.keys(out), ['y']);
  assert.deepEqual(values(out.y!), [2]);
  assert.throws(
    () =>
      combineOutputs({ op: 'max' }, [
        { name: 'a', outputs: { y: t([1], [1]) } },
        { name: 'b', outputs: { y: t([2], [1, 2]) } },
      ]),
    (err: unknown) =>
      err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_SPEC' && /output 'y' of member 'b' float32\[2\]/.test(err.message),
  );
  assert.throws(
    () => combineOutputs({ op: 'mean' }, [{ name: 'a', outputs: { s: tensor('string', [1], ['x']) } }]),
    /do not take string tensors/,
  );
});
