/**
 * The element types onnxruntime-node accepts, with the typed array that carries each one.
 * Names follow onnxruntime's `Tensor.Type`. `bytes` is the size of one element on the wire;
 * the 4-bit types pack two elements a byte, `string` travels as a list of strings.
 */
export const DTYPES = {
  float32: { bytes: 4, array: Float32Array },
  float64: { bytes: 8, array: Float64Array },
  float16: { bytes: 2, array: Uint16Array },
  int8: { bytes: 1, array: Int8Array },
  uint8: { bytes: 1, array: Uint8Array },
  int16: { bytes: 2, array: Int16Array },
  uint16: { bytes: 2, array: Uint16Array },
  int32: { bytes: 4, array: Int32Array },
  uint32: { bytes: 4, array: Uint32Array },
  int64: { bytes: 8, array: BigInt64Array },
  uint64: { bytes: 8, array: BigUint64Array },
  bool: { bytes: 1, array: Uint8Array },
  int4: { bytes: 0.5, array: Int8Array },
  uint4: { bytes: 0.5, array: Uint8Array },
  string: { bytes: 0, array: null },
} as const;

export type DType = keyof typeof DTYPES;
export type NumericDType = Exclude<DType, 'string'>;

export const DTYPE_NAMES = Object.keys(DTYPES) as [DType, ...DType[]];

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(DTYPES, value);
}

/** Bytes that `count` elements of `dtype` take on the wire (4-bit types round up to whole bytes). */
export function byteLengthOf(dtype: NumericDType, count: number): number {
  return Math.ceil(count * DTYPES[dtype].bytes);
}

/** The element size a typed array view of `dtype` must be aligned to. */
export function alignmentOf(dtype: NumericDType): number {
  return DTYPES[dtype].array.BYTES_PER_ELEMENT;
}
