import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateInputs } from '../../runtime/internal.js';
import type { ModelMetadata, WireTensor } from '../../runtime/internal.js';

const meta: ModelMetadata = {
  inputs: [
    { name: 'a', dtype: 'float32', shape: ['N', 4] },
    { name: 'b', dtype: 'int64', shape: ['N'] },
  ],
  outputs: [{ name: 'y', dtype: 'float32', shape: ['N', 2] }],
};
const t = (dtype: WireTensor['dtype'], shape: number[]): WireTensor => ({ dtype, shape, data: new Uint8Array(0) });

test('inputs that fit pass, symbolic dims take any size', () => {
  validateInputs('m', meta, { a: t('float32', [7, 4]), b: t('int64', [7]) }, ['y']);
});

test('a symbolic dim must mean the same size in every input', () => {
  assert.throws(() => validateInputs('m', meta, { a: t('float32', [2, 4]), b: t('int64', [3]) }), {
    code: 'TROUPE_ERR_BAD_INPUT',
    message: "input 'b': expected int64[N], got int64[3]",
  });
});

test('each kind of mismatch is named', () => {
  const cases: [Record<string, WireTensor>, string][] = [
    [{ a: t('float32', [1, 4]), b: t('int64', [1]), c: t('float32', [1]) }, "unknown input 'c': model 'm' takes 'a', 'b'"],
    [{ a: t('float32', [1, 4]) }, "missing input 'b' (int64[N]) for model 'm'"],
    [{ a: t('float64', [1, 4]), b: t('int64', [1]) }, "input 'a': expected float32[N,4], got float64[1,4]"],
    [{ a: t('float32', [1, 5]), b: t('int64', [1]) }, "input 'a': expected float32[N,4], got float32[1,5]"],
    [{ a: t('float32', [1, 4, 1]), b: t('int64', [1]) }, "input 'a': expected float32[N,4], got float32[1,4,1]"],
  ];
  for (const [inputs, message] of cases) assert.throws(() => validateInputs('m', meta, inputs), { code: 'TROUPE_ERR_BAD_INPUT', message });
});
