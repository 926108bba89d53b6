import { z } from 'zod';
import { TroupeError } from '../errors.js';
import { checkWire } from '../tensor/wire.js';
import type { WireTensor, WireTensorMap } from '../tensor/wire.js';
import { MAX_RANK, checkShape, elementCount } from '../tensor/tensor.js';
import { BinaryReader, binaryBody, decodeBytesElements, encodeBytesElements } from './binary.js';
import { datatypeOfDtype, dtypeOfDatatype, oipDtype } from './datatypes.js';
import { jsonTextOfWire, wireFromJson } from './json.js';
import { MODEL_VERSION } from './infer-backend.js';
import { keepResponseHeader, keptResponseHeader } from './response-header-memo.js';

/**
 * The Open Inference Protocol inference request and response (KServe v2 "Inference Request JSON
 * Object", with Triton's binary tensor data extension), to and from Troupe's wire tensors.
 */

/** "$parameter = $string : $string | $number | $boolean". */
export const ParametersSchema = z.record(z.string().max(256), z.union([z.string().max(4096), z.number(), z.boolean()]));

export const RequestInputSchema = z.object({
  name: z.string().min(1).max(256),
  shape: z.array(z.number()).max(MAX_RANK),
  datatype: z.string().max(64),
  parameters: ParametersSchema.optional(),
  data: z.unknown().optional(),
});

export const RequestOutputSchema = z.object({
  name: z.string().min(1).max(256),
  parameters: ParametersSchema.optional(),
});

export const InferRequestSchema = z.object({
  id: z.string().max(256).optional(),
  parameters: ParametersSchema.optional(),
  inputs: z.array(RequestInputSchema).max(1024),
  outputs: z.array(RequestOutputSchema).max(1024).optional(),
});
export type InferRequest = z.infer<typeof InferRequestSchema>;

export interface DecodedRequest {
  inputs: WireTensorMap;
  /** The outputs asked for, in the order asked; undefined: all of them. */
  outputs: string[] | undefined;
  /** From Triton's request parameter `timeout`, given in microseconds. */
  timeoutMs: number | undefined;
}

function wholeNumber(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${what} must be a whole number >= 0, got ${JSON.stringify(value)}`);
  }
  return value;
}

function decodeInput(input: InferRequest['inputs'][number], reader: BinaryReader): WireTensor {
  const label = `input '${input.name}'`;
  checkShape(input.shape, label);
  const dtype = dtypeOfDatatype(input.datatype, label);
  const size = input.parameters?.binary_data_size;
  if (size === undefined) {
    if (input.data === undefined)
      throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${label} has neither "data" nor parameters.binary_data_size`);
    return wireFromJson(dtype, input.shape, input.data, label);
  }
  if (input.data !== undefined)
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${label} has both "data" and parameters.binary_data_size; give one`);
  const bytes = reader.take(wholeNumber(size, `${label}: binary_data_size`), label);
  // The request may be a memo's frozen one (request-memo.ts): each call's tensors get their own shape.
  const shape = [...input.shape];
  if (dtype === 'string') return { dtype, shape, data: decodeBytesElements(bytes, elementCount(shape), label) };
  const wire: WireTensor = { dtype, shape, data: bytes };
  checkWire(wire, label);
  return wire;
}

/** Turns a parsed request and the body's binary section into wire tensors, checking every input. */
export function decodeInferRequest(request: InferRequest, binary: Buffer): DecodedRequest {
  const reader = new BinaryReader(binary);
  const inputs: WireTensorMap = {};
  for (const input of request.inputs) {
    if (Object.hasOwn(inputs, input.name)) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `input '${input.name}' is given twice`);
    inputs[input.name] = decodeInput(input, reader);
  }
  reader.finish();
  let outputs: string[] | undefined;
  if (request.outputs) {
    outputs = request.outputs.map((o) => o.name);
    const twice = outputs.find((name, i) => outputs!.indexOf(name) !== i);
    if (twice !== undefined) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `output '${twice}' is asked for twice`);
  }
  const timeout = request.parameters?.timeout;
  // Triton's timeout is in microseconds and 0 means none; below a millisecond it is already spent.
  const micros = timeout === undefined ? 0 : wholeNumber(timeout, 'parameters.timeout (microseconds)');
  return { inputs, outputs, timeoutMs: micros > 0 ? Math.floor(micros / 1000) : undefined };
}

/**
 * Whether an output goes back as binary data: its own `binary_data` parameter, else the request's
 * `binary_data_output`, else JSON (Triton's rule).
 */
export function wantsBinary(request: InferRequest, output: string): boolean {
  const own = request.outputs?.find((o) => o.name === output)?.parameters?.binary_data;
  if (typeof own === 'boolean') return own;
  return request.parameters?.binary_data_output === true;
}

export interface EncodedResponse {
  body: Buffer | string;
  contentType: string;
  /** Set when any output is binary: the JSON part's length, for Inference-Header-Content-Length. */
  headerLength: number | undefined;
}

/** The inference response: JSON, or JSON followed by binary outputs when any output asks for it. */
export function encodeInferResponse(
  model: string,
  request: InferRequest,
  outputs: WireTensorMap,
  order: readonly string[],
  version: string = MODEL_VERSION,
): EncodedResponse {
  const header = keptResponseHeader(request, model, version, outputs, order);
  if (header)
    return binaryResponse(
      header,
      order.map((name) => outputs[name]!.data as Uint8Array),
    );
  const parts: Uint8Array[] = [];
  const texts: string[] = [];
  for (const name of order) {
    const w = outputs[name];
    if (!w) continue;
    const label = `output '${name}'`;
    const datatype = datatypeOfDtype(oipDtype(w.dtype, label));
    const head = { name, datatype, shape: w.shape };
    if (wantsBinary(request, name)) {
      const bytes = w.dtype === 'string' ? encodeBytesElements(w.data as string[]) : (w.data as Uint8Array);
      parts.push(bytes);
      texts.push(JSON.stringify({ ...head, parameters: { binary_data_size: bytes.byteLength } }));
    } else {
      texts.push(`${JSON.stringify(head).slice(0, -1)},"data":${jsonTextOfWire(w, label)}}`);
    }
  }
  const envelope = JSON.stringify({ model_name: model, model_version: version, ...(request.id !== undefined ? { id: request.id } : {}) });
  const json = `${envelope.slice(0, -1)},"outputs":[${texts.join(',')}]}`;
  if (parts.length === 0) return { body: json, contentType: 'application/json; charset=utf-8', headerLength: undefined };
  const written = Buffer.from(json, 'utf8');
  keepResponseHeader(request, model, version, outputs, order, (name) => wantsBinary(request, name), written);
  return binaryResponse(written, parts);
}

function binaryResponse(header: Buffer, parts: readonly Uint8Array[]): EncodedResponse {
  return { ...binaryBody(header, parts), contentType: 'application/octet-stream' };
}
