import onnxProto from 'onnx-proto';
import type { onnx as OnnxTypes } from 'onnx-proto';
import { TroupeError } from './errors.js';
import type { TensorInfo } from './protocol/common.js';

// onnx-proto is CommonJS; under NodeNext only its default export is reliably importable.
const { onnx } = onnxProto;

/**
 * Reads a model's metadata by parsing it as an ONNX ModelProto (protobuf only, no onnxruntime
 * session): the head's check of an uploaded model, and a multiplexed replica's answer for a model
 * of its set it has not loaded. A file that does not parse, or has no graph or no outputs, is refused.
 */
export interface OnnxSummary {
  irVersion: number;
  opsets: { domain: string; version: number }[];
  producer: string;
  inputs: TensorInfo[];
  outputs: TensorInfo[];
}

/** TensorProto.DataType numbers to onnxruntime's names (the ones Troupe's dtypes use). */
const ELEM_TYPES: Record<number, string> = {
  1: 'float32',
  2: 'uint8',
  3: 'int8',
  4: 'uint16',
  5: 'int16',
  6: 'int32',
  7: 'int64',
  8: 'string',
  9: 'bool',
  10: 'float16',
  11: 'float64',
  12: 'uint32',
  13: 'uint64',
  14: 'complex64',
  15: 'complex128',
  16: 'bfloat16',
  21: 'uint4',
  22: 'int4',
};

type Int64 = number | { toString(): string } | null | undefined;

function num(value: Int64): number {
  return value === null || value === undefined ? 0 : Number(value.toString());
}

function tensorInfo(v: OnnxTypes.IValueInfoProto): TensorInfo {
  const t = v.type?.tensorType;
  if (!t) return { name: v.name ?? '', dtype: 'non-tensor', shape: [] };
  const shape = (t.shape?.dim ?? []).map((d, i): number | string =>
    d.dimParam ? d.dimParam : d.dimValue !== null && d.dimValue !== undefined ? num(d.dimValue) : `d${i}`,
  );
  return { name: v.name ?? '', dtype: ELEM_TYPES[t.elemType ?? 0] ?? `onnx-type-${t.elemType ?? 0}`, shape };
}

export function inspectOnnx(bytes: Uint8Array, label: string): OnnxSummary {
  let model: OnnxTypes.ModelProto;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (err) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_MODEL_FILE',
      `${label} is not an ONNX model: the protobuf does not parse (${(err as Error).message})`,
    );
  }
  const graph = model.graph;
  if (num(model.irVersion) <= 0 || !graph)
    throw new TroupeError('TROUPE_ERR_BAD_MODEL_FILE', `${label} is not an ONNX model: it has no ir_version or no graph`);
  if ((graph.output ?? []).length === 0) throw new TroupeError('TROUPE_ERR_BAD_MODEL_FILE', `${label}: the ONNX graph declares no outputs`);
  // Before IR version 4 initializers were listed as inputs too; callers never feed those.
  const initializers = new Set((graph.initializer ?? []).map((i) => i.name));
  return {
    irVersion: num(model.irVersion),
    opsets: (model.opsetImport ?? []).map((o) => ({ domain: o.domain ?? '', version: num(o.version) })),
    producer: [model.producerName, model.producerVersion].filter(Boolean).join(' '),
    inputs: (graph.input ?? []).filter((i) => !initializers.has(i.name ?? '')).map(tensorInfo),
    outputs: (graph.output ?? []).map(tensorInfo),
  };
}
