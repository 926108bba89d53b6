import { TroupeError } from '../errors.js';
import type { DType } from '../tensor/dtypes.js';

/**
 * The Open Inference Protocol's tensor data types (KServe v2 "Tensor Data Types") and the dtype
 * each is carried as inside Troupe. BYTES elements are strings to onnxruntime, so they map to
 * 'string'. int4/uint4 have no OIP name and are not served over HTTP.
 */
export const OIP_TO_DTYPE = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
} as const satisfies Record<string, DType>;

export type OipDatatype = keyof typeof OIP_TO_DTYPE;
export type OipDType = (typeof OIP_TO_DTYPE)[OipDatatype];

export const OIP_DATATYPES = Object.keys(OIP_TO_DTYPE) as OipDatatype[];

const DTYPE_TO_OIP = new Map<string, OipDatatype>(OIP_DATATYPES.map((name) => [OIP_TO_DTYPE[name], name]));

/** Names are case-sensitive in the protocol ("All strings in all contexts are case-sensitive"). */
export function dtypeOfDatatype(datatype: string, label: string): OipDType {
  if (Object.hasOwn(OIP_TO_DTYPE, datatype)) return OIP_TO_DTYPE[datatype as OipDatatype];
  throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: unknown datatype '${datatype}' (use one of ${OIP_DATATYPES.join(', ')})`);
}

/** The OIP name of a dtype a model declares; a dtype without one (int4) is shown upper-cased. */
export function datatypeOfDtype(dtype: string): string {
  return DTYPE_TO_OIP.get(dtype) ?? dtype.toUpperCase();
}

/** A dtype a response can carry; others (int4, uint4) are refused with the output's name. */
export function oipDtype(dtype: DType, label: string): OipDType {
  if (DTYPE_TO_OIP.has(dtype)) return dtype as OipDType;
  throw new TroupeError(
    'TROUPE_ERR_BAD_INPUT',
    `${label}: ${dtype} tensors have no Open Inference Protocol datatype; use the SDK for them`,
  );
}

/** Model metadata dims: symbolic (string) and negative dims are variable, shown as -1. */
export function oipShape(shape: readonly (number | string)[]): number[] {
  return shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1));
}
