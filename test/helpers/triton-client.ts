import { crc32 } from 'node:zlib';
import { deflateRawSync, deflateSync, gunzipSync, inflateSync } from 'node:zlib';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * What Triton's Python HTTP client (tritonclient.http, triton-inference-server/client
 * src/python/library/tritonclient/http/) puts on the wire, rebuilt step by step from its sources
 * so tests can send exactly those requests without Python: `InferInput.set_data_from_numpy`,
 * `InferRequestedOutput`, `_utils._get_inference_request` (rapidjson.dumps of the request, then each
 * input's raw bytes), `InferenceServerClient.infer` (request/response compression and the
 * headers it adds), and `InferResult` (how it reads the answer back). Nothing here comes from
 * Troupe's own encoder.
 */

/**
 * A float as python-rapidjson writes it (tritonclient.http serialises with `rapidjson.dumps`):
 * RapidJSON's shortest digits (Grisu2; the same digits as JavaScript's for these values), placed
 * by its Prettify: fixed notation for a decimal point from 21 digits left to 6 right of the
 * digits, a bare exponent ("1e-7", "1.5e30") beyond; whole values keep ".0"; NaN and Infinity as
 * python-rapidjson's default number mode writes them.
 */
export function rapidjsonFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mantissa, exp] = Math.abs(x).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const kk = Number(exp) + 1; // where the decimal point falls after the digits' first
  const k = kk - digits.length;
  let text: string;
  if (k >= 0 && kk <= 21) text = `${digits}${'0'.repeat(k)}.0`;
  else if (kk > 0 && kk <= 21) text = `${digits.slice(0, kk)}.${digits.slice(kk)}`;
  else if (kk > -6 && kk <= 0) text = `0.${'0'.repeat(-kk)}${digits}`;
  else if (digits.length === 1) text = `${digits}e${kk - 1}`;
  else text = `${digits[0]}.${digits.slice(1)}e${kk - 1}`;
  return sign + text;
}

/** A value a Python client would have built: `float` marks numbers Python holds as floats (numpy .item() of FP32). */
export type PyValue = string | number | boolean | null | { float: number } | PyValue[] | { [key: string]: PyValue };

/**
 * `rapidjson.dumps(value)` with python-rapidjson's defaults, as tritonclient.http calls it: no
 * whitespace, ASCII only (RapidJSON escapes with upper-case hex), insertion order.
 */
export function rapidjsonDumps(value: PyValue): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string')
    return JSON.stringify(value)
      .replace(/\\u00([0-9a-f]{2})/g, (_, hex: string) => `\\u00${hex.toUpperCase()}`)
      .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
  if (Array.isArray(value)) return `[${value.map(rapidjsonDumps).join(',')}]`;
  if ('float' in value && typeof value.float === 'number' && Object.keys(value).length === 1) return rapidjsonFloat(value.float);
  return `{${Object.entries(value as Record<string, PyValue>)
    .map(([k, v]) => `${rapidjsonDumps(k)}:${rapidjsonDumps(v)}`)
    .join(',')}}`;
}

/** InferInput(name, shape, datatype).set_data_from_numpy(array, binary_data). */
export interface TritonInput {
  name: string;
  shape: number[];
  datatype: string;
  /** The array's bytes (numpy `tobytes()`), for binary_data=True. */
  bytes?: Uint8Array;
  /** The array's elements (`[v.item() for v in a.flatten()]`), for binary_data=False. */
  values?: PyValue[];
}

/** InferRequestedOutput(name, binary_data=True, class_count=0). */
export interface TritonOutput {
  name: string;
  binaryData?: boolean;
  classCount?: number;
}

function inputTensor(input: TritonInput): PyValue {
  const tensor: Record<string, PyValue> = { name: input.name, shape: input.shape, datatype: input.datatype };
  if (input.bytes) tensor.parameters = { binary_data_size: input.bytes.byteLength };
  else tensor.data = input.values ?? [];
  return tensor;
}

function outputTensor(output: TritonOutput): PyValue {
  // _requested_output.py: classification first when class_count != 0, then binary_data always.
  const parameters: Record<string, PyValue> = {};
  if (output.classCount) parameters.classification = output.classCount;
  parameters.binary_data = output.binaryData ?? true;
  return { name: output.name, parameters };
}

/** `_get_inference_request`: the body, and json_size when any input is binary (else None). */
export function inferenceRequest(
  inputs: TritonInput[],
  outputs: TritonOutput[] | undefined,
  options: {
    requestId?: string;
    sequenceId?: number;
    sequenceStart?: boolean;
    sequenceEnd?: boolean;
    priority?: number;
    timeout?: number;
    parameters?: Record<string, PyValue>;
  } = {},
): { body: Buffer; jsonSize: number | undefined } {
  // In _get_inference_request's order: id; sequence, priority and timeout parameters; inputs;
  // outputs (or binary_data_output); the caller's own parameters last.
  const request: Record<string, PyValue> = {};
  const parameters: Record<string, PyValue> = {};
  if (options.requestId) request.id = options.requestId;
  if (options.sequenceId) {
    parameters.sequence_id = options.sequenceId;
    parameters.sequence_start = options.sequenceStart ?? false;
    parameters.sequence_end = options.sequenceEnd ?? false;
  }
  if (options.priority) parameters.priority = options.priority;
  if (options.timeout !== undefined) parameters.timeout = options.timeout;
  request.inputs = inputs.map(inputTensor);
  if (outputs?.length) request.outputs = outputs.map(outputTensor);
  else parameters.binary_data_output = true;
  Object.assign(parameters, options.parameters ?? {});
  if (Object.keys(parameters).length) request.parameters = parameters;
  const json = rapidjsonDumps(request);
  const raws = inputs.filter((i) => i.bytes).map((i) => i.bytes!);
  // json_size = len(request_json): characters, which are bytes since rapidjson.dumps writes ASCII.
  if (raws.length === 0) return { body: Buffer.from(json, 'latin1'), jsonSize: undefined };
  return { body: Buffer.concat([Buffer.from(json, 'latin1'), ...raws]), jsonSize: json.length };
}

/** Python's `gzip.compress(data)` (3.8+): a 10-byte header with mtime, XFL 2 (level 9), OS 255; raw deflate; CRC-32 and size. */
export function pythonGzipCompress(data: Buffer, mtime: number): Buffer {
  const header = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff]);
  header.writeUInt32LE(mtime >>> 0, 4);
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc32(data) >>> 0, 0);
  trailer.writeUInt32LE(data.length >>> 0, 4);
  return Buffer.concat([header, deflateRawSync(data, { level: 9 }), trailer]);
}

/**
 * `InferenceServerClient.infer(...)`'s request: the URI, the body (compressed as asked) and the
 * headers it adds, in its order: Content-Encoding, Accept-Encoding, Inference-Header-Content-Length.
 */
export function tritonInfer(
  model: string,
  inputs: TritonInput[],
  outputs: TritonOutput[] | undefined,
  options: Parameters<typeof inferenceRequest>[2] & {
    requestCompression?: 'gzip' | 'deflate';
    responseCompression?: 'gzip' | 'deflate';
    modelVersion?: string;
    /** query_params: `?` and `_get_query_string` (quote_plus of each key and value). */
    queryParams?: Record<string, string>;
  } = {},
): { path: string; body: Buffer; headers: Record<string, string> } {
  const request = inferenceRequest(inputs, outputs, options);
  let body = request.body;
  const headers: Record<string, string> = {};
  if (options.requestCompression === 'gzip') {
    headers['Content-Encoding'] = 'gzip';
    body = pythonGzipCompress(body, Math.floor(Date.now() / 1000));
  } else if (options.requestCompression === 'deflate') {
    headers['Content-Encoding'] = 'deflate';
    // zlib.compress(data): the zlib format at the default level.
    body = deflateSync(body);
  }
  if (options.responseCompression) headers['Accept-Encoding'] = options.responseCompression;
  if (request.jsonSize !== undefined) headers['Inference-Header-Content-Length'] = String(request.jsonSize);
  const quoted = encodeURIComponent(model);
  const path = options.modelVersion ? `/v2/models/${quoted}/versions/${options.modelVersion}/infer` : `/v2/models/${quoted}/infer`;
  const plus = (text: string) => encodeURIComponent(text).replace(/%20/g, '+');
  const query = Object.entries(options.queryParams ?? {})
    .map(([k, v]) => `${plus(k)}=${plus(v)}`)
    .join('&');
  return { path: options.queryParams ? `${path}?${query}` : path, body, headers };
}

export interface TritonOutputResult {
  name: string;
  datatype: string;
  shape: number[];
  /** FP32 elements, or BYTES elements as strings, as `as_numpy` gives them. */
  data: number[] | string[];
}

/** `deserialize_bytes_tensor`: 4-byte little-endian lengths, each followed by its bytes. */
export function deserializeBytes(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at < bytes.length;) {
    const length = bytes.readUInt32LE(at);
    out.push(bytes.toString('utf8', at + 4, at + 4 + length));
    at += 4 + length;
  }
  return out;
}

/** `InferResult(response)` then `as_numpy(name)` for each output (FP32 and BYTES, as these tests use). */
export function inferResult(
  headers: IncomingHttpHeaders,
  raw: Buffer,
): { result: Record<string, unknown>; outputs: Map<string, TritonOutputResult> } {
  const coding = headers['content-encoding'];
  const body = coding === 'gzip' ? gunzipSync(raw) : coding === 'deflate' ? inflateSync(raw) : raw;
  const headerLength = headers['inference-header-content-length'];
  const jsonEnd = headerLength === undefined ? body.length : Number(headerLength);
  const result = JSON.parse(body.subarray(0, jsonEnd).toString('utf8')) as {
    outputs: { name: string; datatype: string; shape: number[]; parameters?: { binary_data_size?: number }; data?: unknown[] }[];
  };
  const buffer = body.subarray(jsonEnd);
  const outputs = new Map<string, TritonOutputResult>();
  let index = 0;
  for (const output of result.outputs) {
    const size = output.parameters?.binary_data_size;
    let data: number[] | string[];
    if (size !== undefined) {
      const bytes = buffer.subarray(index, index + size);
      index += size;
      if (output.datatype === 'BYTES') data = deserializeBytes(bytes);
      else if (output.datatype === 'FP32') data = [...new Float32Array(new Uint8Array(bytes).buffer)];
      else throw new Error(`this helper reads FP32 and BYTES outputs, not ${output.datatype}`);
    } else data = output.data as number[] | string[];
    outputs.set(output.name, { name: output.name, datatype: output.datatype, shape: output.shape, data });
  }
  return { result: result as unknown as Record<string, unknown>, outputs };
}
