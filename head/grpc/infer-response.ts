import { MODEL_VERSION, datatypeOfDtype, encodeBytesElements, fromWire, oipDtype } from '../../runtime/internal.js';
import type { TypedArray, WireTensorMap } from '../../runtime/internal.js';
import type { InferOutputTensor, ModelInferResponse, TensorContents } from './messages.js';

/**
 * Outputs as a ModelInferResponse. Raw: each output's bytes in raw_output_contents, in the order of
 * `outputs` (BYTES as 4-byte lengths and bytes), the actor's buffers passed on without a copy; this
 * is how Triton answers and what tritonclient reads. Typed: each output's elements in the contents
 * field of its datatype. The protocol allows one form per response, so a response that holds an
 * FP16 output (which has no typed field) is raw whatever was asked.
 */

function typedContents(name: string, w: WireTensorMap[string]): Partial<Record<keyof TensorContents, unknown[]>> {
  const t = fromWire(w, `output '${name}'`);
  const data = t.data;
  switch (t.dtype) {
    case 'string':
      return { bytes_contents: (data as string[]).map((s) => Buffer.from(s, 'utf8')) };
    case 'bool':
      return { bool_contents: Array.from(data as Uint8Array, (b) => b !== 0) };
    case 'int8':
    case 'int16':
    case 'int32':
      return { int_contents: Array.from(data as Int32Array) };
    case 'uint8':
    case 'uint16':
    case 'uint32':
      return { uint_contents: Array.from(data as Uint32Array) };
    case 'int64':
      return { int64_contents: Array.from(data as BigInt64Array, String) };
    case 'uint64':
      return { uint64_contents: Array.from(data as BigUint64Array, String) };
    case 'float64':
      return { fp64_contents: Array.from(data as Float64Array) };
    default:
      return { fp32_contents: Array.from(data as TypedArray as Float32Array) };
  }
}

export function grpcInferResponse(
  model: string,
  id: string | undefined,
  outputs: WireTensorMap,
  order: readonly string[],
  raw: boolean,
  version: string = MODEL_VERSION,
): ModelInferResponse {
  const present = order.filter((name) => outputs[name] !== undefined);
  const heads = present.map((name): InferOutputTensor => {
    const w = outputs[name]!;
    return { name, datatype: datatypeOfDtype(oipDtype(w.dtype, `output '${name}'`)), shape: w.shape };
  });
  const asRaw = raw || present.some((name) => outputs[name]!.dtype === 'float16');
  const response: ModelInferResponse = {
    model_name: model,
    model_version: version,
    id: id ?? '',
    outputs: heads,
    raw_output_contents: [],
  };
  present.forEach((name, i) => {
    const w = outputs[name]!;
    if (asRaw) response.raw_output_contents.push(w.dtype === 'string' ? encodeBytesElements(w.data as string[]) : (w.data as Uint8Array));
    else heads[i]!.contents = typedContents(name, w);
  });
  return response;
}
