import {
  MAX_REQUEST_ELEMENTS,
  TroupeError,
  checkShape,
  checkWire,
  decodeBytesElements,
  dtypeOfDatatype,
  elementCount,
  tooMany,
  wireFromJson,
} from '../../runtime/internal.js';
import type { InferRequest, OipDType, Params, WireTensor, WireTensorMap } from '../../runtime/internal.js';
import type { InferParameter, ModelInferRequest, TensorContents } from './messages.js';

/**
 * A ModelInferRequest as the head's inference path takes it: the same wire tensors, the same
 * checks and the same parameters an HTTP request decodes to (runtime/oip/codec.ts), from either of
 * the two ways the gRPC protocol carries tensors: `raw_input_contents` (the bytes, as binary
 * tensor data carries them over HTTP) or each input's typed `contents`.
 */

export interface DecodedGrpcRequest {
  params: Params;
  inputs: WireTensorMap;
  /** The outputs asked for, in the order asked; undefined: all. */
  outputs: string[] | undefined;
  timeoutMs: number | undefined;
  /** The request's parameters in the HTTP request's shape, for the rules both share (classification). */
  oip: InferRequest;
  /** Whether outputs go back as raw_output_contents (else as typed contents). */
  rawOutputs: boolean;
}

type ParameterValue = string | number | boolean;

/** An InferParameter's value; 64-bit integers as numbers while exact, as their digits beyond. */
function parameterValue(p: InferParameter): ParameterValue {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param ?? false;
    case 'double_param':
      return p.double_param ?? 0;
    case 'int64_param':
    case 'uint64_param': {
      const text = p[p.parameter_choice] ?? '0';
      const n = Number(text);
      return Number.isSafeInteger(n) ? n : text;
    }
    default:
      return p.string_param ?? '';
  }
}

function parameters(map: Record<string, InferParameter>): Record<string, ParameterValue> {
  const out: Record<string, ParameterValue> = {};
  for (const [key, p] of Object.entries(map)) out[key] = parameterValue(p);
  return out;
}

/** The typed field each datatype's elements travel in (FP16 has none: it travels only raw). */
const CONTENTS_FIELD: Record<OipDType, keyof TensorContents | undefined> = {
  bool: 'bool_contents',
  int8: 'int_contents',
  int16: 'int_contents',
  int32: 'int_contents',
  int64: 'int64_contents',
  uint8: 'uint_contents',
  uint16: 'uint_contents',
  uint32: 'uint_contents',
  uint64: 'uint64_contents',
  float16: undefined,
  float32: 'fp32_contents',
  float64: 'fp64_contents',
  string: 'bytes_contents',
};

/** 64-bit contents come as decimal strings (every digit kept), checked and written as little-endian bytes. */
function wide(dtype: 'int64' | 'uint64', shape: number[], values: unknown[], label: string): WireTensor {
  const array = dtype === 'int64' ? new BigInt64Array(values.length) : new BigUint64Array(values.length);
  const [min, max] = dtype === 'int64' ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
  values.forEach((v, i) => {
    const n = typeof v === 'string' && /^-?\d{1,20}$/.test(v) ? BigInt(v) : undefined;
    if (n === undefined || n < min || n > max)
      throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: contents element ${i} is not a ${dtype.toUpperCase()} value`);
    array[i] = n;
  });
  return { dtype, shape, data: new Uint8Array(array.buffer) };
}

function fromContents(dtype: OipDType, shape: number[], contents: TensorContents | null | undefined, label: string): WireTensor {
  const field = CONTENTS_FIELD[dtype];
  if (!field)
    throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: FP16 has no typed contents field; send FP16 tensors in raw_input_contents`);
  const values = contents?.[field] ?? [];
  const count = elementCount(shape);
  if (values.length !== count)
    throw new TroupeError(
      'TROUPE_ERR_BAD_TENSOR',
      `${label}: shape [${shape.join(',')}] holds ${count} elements, contents.${field} has ${values.length}`,
    );
  if (dtype === 'int64' || dtype === 'uint64') return wide(dtype, shape, values, label);
  if (dtype === 'string') {
    const strings = values.map((v) => (v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('utf8') : ''));
    return { dtype, shape, data: strings };
  }
  // The HTTP decoder's checks of each element (ranges of the narrow integer types, booleans, numbers).
  return wireFromJson(dtype, shape, values, label);
}

function fromRaw(dtype: OipDType, shape: number[], bytes: Uint8Array, label: string): WireTensor {
  if (dtype === 'string') return { dtype, shape, data: decodeBytesElements(bytes, elementCount(shape), label) };
  const wire: WireTensor = { dtype, shape, data: bytes };
  checkWire(wire, label);
  return wire;
}

function shapeOf(shape: number[], label: string): number[] {
  checkShape(shape, label);
  return shape;
}

function wholeMicros(value: ParameterValue | undefined): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `parameters.timeout (microseconds) must be a whole number >= 0, got ${JSON.stringify(value)}`,
    );
  return value;
}

/**
 * Decodes and checks a request. `deadlineMs` is what is left of the call's own deadline; Triton's
 * `timeout` parameter (microseconds, 0 none) may shorten it, never lengthen it.
 */
export function decodeGrpcRequest(request: ModelInferRequest, deadlineMs: number | undefined): DecodedGrpcRequest {
  const raw = request.raw_input_contents;
  if (raw.length > 0 && raw.length !== request.inputs.length)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `raw_input_contents has ${raw.length} entries for ${request.inputs.length} inputs: give one per input, in the order of inputs`,
    );
  const shapes = request.inputs.map((input) => shapeOf(input.shape, `input '${input.name}'`));
  // Checked before any tensor is built: a declared shape costs nothing to refuse.
  const total = shapes.reduce((sum, shape) => sum + elementCount(shape), 0);
  if (total > MAX_REQUEST_ELEMENTS) throw tooMany(`the inputs' shapes declare ${total} elements`, MAX_REQUEST_ELEMENTS);
  const inputs: WireTensorMap = {};
  request.inputs.forEach((input, i) => {
    const label = `input '${input.name}'`;
    if (Object.hasOwn(inputs, input.name)) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `input '${input.name}' is given twice`);
    const dtype = dtypeOfDatatype(input.datatype, label);
    if (raw.length > 0 && input.contents && Object.values(input.contents).some((values) => values.length > 0))
      throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${label} has contents and the request has raw_input_contents; give one`);
    inputs[input.name] =
      raw.length > 0 ? fromRaw(dtype, shapes[i]!, raw[i]!, label) : fromContents(dtype, shapes[i]!, input.contents, label);
  });
  const outputs = request.outputs.length > 0 ? request.outputs.map((o) => o.name) : undefined;
  const twice = outputs?.find((name, i) => outputs.indexOf(name) !== i);
  if (twice !== undefined) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `output '${twice}' is asked for twice`);
  const requestParameters = parameters(request.parameters);
  const micros = wholeMicros(requestParameters.timeout);
  const timeouts = [micros > 0 ? Math.floor(micros / 1000) : undefined, deadlineMs].filter((t): t is number => t !== undefined);
  const asked = requestParameters.binary_data_output;
  if (asked !== undefined && typeof asked !== 'boolean')
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `parameters.binary_data_output must be a bool, got ${JSON.stringify(asked)}`);
  return {
    params: { name: request.model_name, ...(request.model_version ? { version: request.model_version } : {}) },
    inputs,
    outputs,
    timeoutMs: timeouts.length > 0 ? Math.min(...timeouts) : undefined,
    oip: {
      ...(request.id ? { id: request.id } : {}),
      parameters: requestParameters,
      inputs: [],
      outputs: request.outputs.map((o) => ({ name: o.name, parameters: parameters(o.parameters) })),
    },
    // As Triton answers (raw), unless the request sent typed contents or says otherwise.
    rawOutputs: asked ?? (raw.length > 0 || request.inputs.length === 0),
  };
}
