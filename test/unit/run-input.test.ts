import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TroupeError, tensor } from '../../runtime/internal.js';
import { asTensor } from '../../runtime/client/run-input.js';

describe('run inputs', () => {
  test('a bare typed array is refused with the tensor() call that fixes it', () => {
    const cases: [ArrayBufferView, RegExp][] = [
      [new Float32Array(64), /input 'x' is a bare Float32Array: .*tensor\('float32', \[1, 64\], data\)/],
      [new Int32Array(3), /tensor\('int32', \[1, 3\], data\)/],
      [new BigInt64Array(2), /tensor\('int64', \[1, 2\], data\)/],
    ];
    for (const [value, message] of cases) {
      assert.throws(
        () => asTensor('x', value),
        (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_INPUT' && message.test(err.message),
      );
    }
  });

  test('anything else that is not a tensor is named', () => {
    for (const value of [null, 3, 'x', [1, 2], { dtype: 'float32', shape: [1] }, { shape: [1], data: new Float32Array(1) }]) {
      assert.throws(() => asTensor('img', value), /input 'img' is not a tensor/);
    }
  });

  test('a tensor passes as it is', () => {
    const t = tensor('float32', [1, 2], new Float32Array([1, 2]));
    assert.equal(asTensor('x', t), t);
  });
});
