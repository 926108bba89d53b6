import { TroupeError } from '../errors.js';
import { printable } from './describe.js';
import { DTYPES, alignmentOf, byteLengthOf, isDType } from './dtypes.js';
import type { DType, NumericDType } from './dtypes.js';

export type TypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

export type TensorData = TypedArray | string[];

/**
 * A tensor as users hold it: dtype, shape and a typed array (or strings) in row-major order.
 * The ones `tensor()` makes and `run()` returns print as `float32[1,10] [-0.0827, 0.0819, …]`.
 *
 * @example
 * const x = tensor('float32', [1, 64], new Float32Array(64));
 */
export interface Tensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: TensorData;
}

/** Shapes deeper than this are refused: no ONNX model in practice needs more. */
export const MAX_RANK = 16;

export function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (const dim of shape) count *= dim;
  return count;
}

export function formatShape(dtype: string, shape: readonly (number | string)[]): string {
  return `${dtype}[${shape.join(',')}]`;
}

/** A dim as it was sent: a string quoted, so "1" does not read as the number 1. */
const showDim = (dim: unknown) => (typeof dim === 'string' ? JSON.stringify(dim.slice(0, 32)) : String(dim));

/** Throws TROUPE_ERR_BAD_TENSOR unless every dim is a non-negative safe integer. */
export function checkShape(shape: readonly unknown[], label: string): asserts shape is number[] {
  if (shape.length > MAX_RANK) {
    throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: rank ${shape.length} exceeds the maximum of ${MAX_RANK}`);
  }
  for (const dim of shape) {
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
      // A dim past 2^53 (Triton's overflow check sends 2^60 + 2) is not even exact as a JS number.
      const tooLarge = typeof dim === 'number' && Number.isInteger(dim) && dim > Number.MAX_SAFE_INTEGER;
      throw new TroupeError(
        'TROUPE_ERR_BAD_TENSOR',
        `${label}: shape [${shape.map(showDim).join(',')}] has ${showDim(dim)}, dims must be integers >= 0${tooLarge ? ' and at most 2^53 - 1' : ''}`,
      );
    }
  }
}

/** Which dtype a typed array holds when the caller does not say. */
function arrayMatches(dtype: DType, data: TensorData): boolean {
  const spec = DTYPES[dtype];
  if (spec.array === null) return Array.isArray(data) && data.every((s) => typeof s === 'string');
  return data instanceof spec.array;
}

/**
 * Builds a tensor and checks that its data fits its dtype and shape.
 * Throws TROUPE_ERR_BAD_TENSOR naming the problem otherwise.
 */
export function tensor(dtype: DType, shape: readonly number[], data: TensorData, label = 'tensor'): Tensor {
  if (!isDType(dtype)) throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: unknown dtype '${String(dtype)}'`);
  checkShape(shape, label);
  if (!arrayMatches(dtype, data)) {
    const got = Array.isArray(data) ? 'an array' : (data as object).constructor.name;
    throw new TroupeError(
      'TROUPE_ERR_BAD_TENSOR',
      `${label}: ${dtype} data must be ${DTYPES[dtype].array?.name ?? 'a string[]'}, got ${got}`,
    );
  }
  const count = elementCount(shape);
  const have = dtype === 'int4' || dtype === 'uint4' ? (data as TypedArray).length * 2 : data.length;
  const fits = dtype === 'int4' || dtype === 'uint4' ? have === count || have === count + 1 : have === count;
  if (!fits) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_TENSOR',
      `${label}: ${formatShape(dtype, shape)} holds ${count} elements, data has ${data.length}`,
    );
  }
  return printable({ dtype, shape: [...shape], data });
}

/** Wraps wire bytes as the typed array of `dtype`, copying only when the bytes are misaligned. */
export function viewBytes(dtype: NumericDType, bytes: Uint8Array): TypedArray {
  const Ctor = DTYPES[dtype].array;
  const align = alignmentOf(dtype);
  if (bytes.byteOffset % align !== 0) {
    // Typed array views need aligned offsets; msgpack places bin payloads anywhere in a frame.
    const copy = new Uint8Array(bytes.byteLength);
    copy.set(bytes);
    bytes = copy;
  }
  return new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength / align) as TypedArray;
}

/** The bytes of a typed array, without copying. */
export function bytesOf(data: TypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

export { byteLengthOf };
