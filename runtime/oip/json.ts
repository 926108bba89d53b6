import { DTYPES } from '../tensor/dtypes.js';
import { TroupeError } from '../errors.js';
import { elementCount, formatShape } from '../tensor/tensor.js';
import { viewOfWire } from '../tensor/wire.js';
import type { TypedArray } from '../tensor/tensor.js';
import type { WireTensor } from '../tensor/wire.js';
import { bytesOf } from '../tensor/tensor.js';
import { fromHalfBits, toHalfBits } from './float16.js';
import { datatypeOfDtype } from './datatypes.js';
import type { OipDType } from './datatypes.js';

/**
 * Tensor data given as JSON ("data": nested or flat, row-major) to and from the raw little-endian
 * bytes Troupe carries. Only the JSON path comes here; binary tensor data is sliced from the body
 * as it is (oip-binary.ts).
 */

const INT_RANGES: Partial<Record<OipDType, readonly [number, number]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int16: [-32768, 32767],
  uint16: [0, 65535],
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
};

function describe(value: unknown): string {
  // JSON.stringify writes infinities as null; a number past every range was parsed as one.
  const text = typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/**
 * The elements of `data` in row-major order, nested arrays flattened ("data": [[1, 2], [3, 4]] is
 * [1, 2, 3, 4], as the protocol allows). Stops as soon as there are more than `count`.
 */
export function flattenData(data: unknown, count: number, label: string, shapeText: string): unknown[] {
  if (!Array.isArray(data)) throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: "data" must be an array, got ${describe(data)}`);
  const out: unknown[] = [];
  const stack: { array: unknown[]; at: number }[] = [{ array: data, at: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.at >= top.array.length) {
      stack.pop();
      continue;
    }
    const value = top.array[top.at++];
    if (Array.isArray(value)) {
      stack.push({ array: value, at: 0 });
      continue;
    }
    if (out.length === count)
      throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: shape ${shapeText} holds ${count} elements, "data" has more than ${count}`);
    out.push(value);
  }
  if (out.length !== count)
    throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: shape ${shapeText} holds ${count} elements, "data" has ${out.length}`);
  return out;
}

function badElement(label: string, i: number, value: unknown, want: string, dtype: OipDType): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_BAD_TENSOR',
    `${label}: data[${i}] is ${describe(value)}, expected ${want} for datatype ${datatypeOfDtype(dtype)}`,
  );
}

/** What a float datatype holds: JSON has no infinity, so a value beyond it (1e400, or 1e39 for FP32) is refused, not turned into one. */
const FLOAT_RANGE: Partial<Record<OipDType, string>> = {
  float16: 'a number within ±65504',
  float32: 'a number within ±3.4028235e38',
  float64: 'a finite number',
};

function fillNumbers(values: unknown[], into: Float32Array | Float64Array, label: string, dtype: OipDType): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v !== 'number') throw badElement(label, i, v, 'a number', dtype);
    into[i] = v;
    if (!Number.isFinite(into[i])) throw badElement(label, i, v, FLOAT_RANGE[dtype]!, dtype);
  }
}

/** Builds a wire tensor from an input's JSON "data", checking every element against the datatype. */
export function wireFromJson(dtype: OipDType, shape: number[], data: unknown, label: string): WireTensor {
  const count = elementCount(shape);
  const values = flattenData(data, count, label, `[${shape.join(',')}]`);
  if (dtype === 'string') {
    values.forEach((v, i) => {
      if (typeof v !== 'string') throw badElement(label, i, v, 'a string', dtype);
    });
    return { dtype, shape, data: values as string[] };
  }
  let typed: TypedArray;
  if (dtype === 'float32' || dtype === 'float64') {
    typed = new DTYPES[dtype].array(count);
    fillNumbers(values, typed as Float32Array | Float64Array, label, dtype);
  } else if (dtype === 'float16') {
    const half = new Uint16Array(count);
    values.forEach((v, i) => {
      if (typeof v !== 'number') throw badElement(label, i, v, 'a number', dtype);
      // Values from 65520 up round to infinity in half precision.
      if (!(Math.abs(v) < 65520)) throw badElement(label, i, v, FLOAT_RANGE.float16!, dtype);
      half[i] = toHalfBits(v);
    });
    typed = half;
  } else if (dtype === 'bool') {
    const bytes = new Uint8Array(count);
    values.forEach((v, i) => {
      if (typeof v !== 'boolean') throw badElement(label, i, v, 'true or false', dtype);
      bytes[i] = v ? 1 : 0;
    });
    typed = bytes;
  } else if (dtype === 'int64' || dtype === 'uint64') {
    const big = dtype === 'int64' ? new BigInt64Array(count) : new BigUint64Array(count);
    values.forEach((v, i) => {
      // JSON numbers beyond 2^53 have already lost digits when parsed; refuse rather than guess.
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || (dtype === 'uint64' && v < 0)) {
        throw badElement(
          label,
          i,
          v,
          `an integer${dtype === 'uint64' ? ' >= 0' : ''} within ±2^53 (send larger values as binary data)`,
          dtype,
        );
      }
      big[i] = BigInt(v);
    });
    typed = big;
  } else {
    const [min, max] = INT_RANGES[dtype]!;
    typed = new DTYPES[dtype].array(count);
    values.forEach((v, i) => {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
        throw badElement(label, i, v, `an integer in [${min}, ${max}]`, dtype);
      typed[i] = v;
    });
  }
  return { dtype, shape, data: bytesOf(typed) };
}

/**
 * The JSON text of an output's "data" (flat, row-major). Built as text so INT64 and UINT64 keep
 * every digit (JSON.stringify cannot write a BigInt, and Number would round past 2^53); non-finite
 * floats become null, as JSON.stringify writes them.
 */
export function jsonTextOfWire(w: WireTensor, label: string): string {
  // Read here and dropped: never shown to user code.
  const t = viewOfWire(w, label);
  if (t.dtype === 'string') return JSON.stringify(t.data);
  const data = t.data as TypedArray;
  switch (t.dtype) {
    case 'bool':
      return `[${Array.from(data as Uint8Array, (b) => (b ? 'true' : 'false')).join(',')}]`;
    case 'float16':
      return JSON.stringify(Array.from(data as Uint16Array, fromHalfBits));
    case 'float32':
    case 'float64':
      return JSON.stringify(Array.from(data as Float32Array));
    case 'int64':
    case 'uint64':
      return `[${(data as BigInt64Array).join(',')}]`;
    default:
      if (t.dtype === 'int4' || t.dtype === 'uint4')
        throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: ${formatShape(t.dtype, t.shape)} cannot be written as JSON`);
      return `[${(data as Int32Array).join(',')}]`;
  }
}
