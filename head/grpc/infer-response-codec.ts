import { ProtobufWriter } from './protobuf-writer.js';
import type { InferOutputTensor, ModelInferResponse } from './messages.js';

/**
 * ModelInferResponse and ModelStreamInferResponse straight to their protobuf bytes
 * (proto/grpc_service.proto): the heads of the outputs, then each raw output's bytes copied once,
 * into the message. Typed contents, which Triton's clients ask for less, are written packed.
 */

type Contents = NonNullable<InferOutputTensor['contents']>;

const writeFloat = (buf: Buffer, v: unknown, at: number) => void buf.writeFloatLE(Number(v), at);
const writeDouble = (buf: Buffer, v: unknown, at: number) => void buf.writeDoubleLE(Number(v), at);

/** A packed run of varints, each written by `each`. */
function packedVarints(
  w: ProtobufWriter,
  field: number,
  values: readonly unknown[] | undefined,
  each: (w: ProtobufWriter, v: unknown) => void,
): void {
  if (!values || values.length === 0) return;
  w.nested(field, (inner) => values.forEach((v) => each(inner, v)), values.length * 2);
}

function contents(w: ProtobufWriter, c: Contents): void {
  packedVarints(w, 1, c.bool_contents, (inner, v) => inner.uint(v ? 1 : 0));
  packedVarints(w, 2, c.int_contents, (inner, v) => inner.int32(Number(v)));
  packedVarints(w, 3, c.int64_contents, (inner, v) => inner.big(BigInt(v as string)));
  packedVarints(w, 4, c.uint_contents, (inner, v) => inner.uint(Number(v)));
  packedVarints(w, 5, c.uint64_contents, (inner, v) => inner.big(BigInt(v as string)));
  if (c.fp32_contents) w.packedFixed(6, c.fp32_contents, 4, writeFloat);
  if (c.fp64_contents) w.packedFixed(7, c.fp64_contents, 8, writeDouble);
  for (const bytes of (c.bytes_contents ?? []) as Uint8Array[]) w.bytesField(8, bytes);
}

function outputTensor(w: ProtobufWriter, t: InferOutputTensor): void {
  w.stringField(1, t.name);
  w.stringField(2, t.datatype);
  packedVarints(w, 3, t.shape, (inner, v) => inner.uint(v as number));
  if (t.contents) {
    const c = t.contents;
    w.nested(5, (inner) => contents(inner, c), 1024);
  }
}

function inferResponse(w: ProtobufWriter, r: Partial<ModelInferResponse>): void {
  w.stringField(1, r.model_name ?? '');
  w.stringField(2, r.model_version ?? '');
  w.stringField(3, r.id ?? '');
  for (const t of r.outputs ?? []) w.nested(5, (inner) => outputTensor(inner, t));
  for (const bytes of r.raw_output_contents ?? []) w.bytesField(6, bytes);
}

function rawBytes(r: Partial<ModelInferResponse>): number {
  let total = 0;
  for (const bytes of r.raw_output_contents ?? []) total += bytes.byteLength;
  return total;
}

export function encodeModelInferResponse(response: Partial<ModelInferResponse>): Buffer {
  const w = new ProtobufWriter(256 + rawBytes(response));
  inferResponse(w, response);
  return w.finish();
}

/** One answer of ModelStreamInfer: a response, or the error of its request with the request's name and id. */
export interface ModelStreamInferResponse {
  error_message: string;
  infer_response: Partial<ModelInferResponse>;
}

export function encodeModelStreamInferResponse(answer: ModelStreamInferResponse): Buffer {
  const w = new ProtobufWriter(256 + rawBytes(answer.infer_response));
  w.stringField(1, answer.error_message);
  // Built apart and copied once more: its length goes before it.
  w.bytesField(2, encodeModelInferResponse(answer.infer_response));
  return w.finish();
}
