import { TroupeError } from '../errors.js';
import { DTYPES } from '../tensor/dtypes.js';
import type { Tensor } from '../tensor/tensor.js';

/** The dtype a typed array most likely carries: the first whose array type it is (Uint16Array: uint16). */
function dtypeOfArray(data: ArrayBufferView): string {
  const named = Object.entries(DTYPES).find(
    ([name, spec]) => spec.array !== null && data instanceof spec.array && !['float16', 'bool', 'int4', 'uint4'].includes(name),
  );
  return named?.[0] ?? 'float32';
}

/**
 * Checks that a run input is a tensor (`{ dtype, shape, data }`, as `tensor()` makes one), and
 * says how to make one when it is not: a bare typed array is the usual slip, and without this it
 * fails deep inside the encoder with "t.shape is not iterable".
 */
export function asTensor(name: string, value: unknown): Tensor {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    const length = (value as unknown as { length: number }).length;
    const dtype = dtypeOfArray(value);
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `input '${name}' is a bare ${value.constructor.name}: give it a dtype and shape with tensor(), e.g. { ${name}: tensor('${dtype}', [1, ${length}], data) } (import { tensor } from 'troupe')`,
    );
  }
  const t = value as Partial<Tensor> | null;
  if (t === null || typeof t !== 'object' || typeof t.dtype !== 'string' || !Array.isArray(t.shape) || t.data === undefined) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `input '${name}' is not a tensor: pass tensor(dtype, shape, data), a Future of an earlier run, or future.output(name)`,
    );
  }
  return t as Tensor;
}
