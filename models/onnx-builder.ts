/**
 * A tiny ONNX graph builder over the protobufjs definitions in `onnx-proto`, so models can
 * be produced reproducibly in TypeScript instead of downloaded.
 */
import onnxProto from 'onnx-proto';
import type { onnx as OnnxTypes } from 'onnx-proto';

// onnx-proto is CommonJS; under NodeNext only its default export is reliably importable.
const { onnx } = onnxProto;

declare global {
  /**
   * onnx-proto's types (protobufjs 6) name `Long` as a global, which @types/long declares only for
   * scripts (a UMD global): a project that type-checks its libraries (`skipLibCheck: false`) got
   * 24 x "Cannot find name 'Long'" from importing `troupe/models`. This is the int64 value those
   * types carry, as protobufjs decodes it; an interface, so it merges with any other `Long`.
   */
  interface Long {
    low: number;
    high: number;
    unsigned: boolean;
  }
}

/** Element types the builder can declare (inputs, outputs); initializers store the first three. */
export type DType = 'float32' | 'int64' | 'int32' | 'float16' | 'string';

/** A tensor dimension: a fixed size, or a symbolic name such as `'N'` for the batch. */
export type Dim = number | string;

/** Typed arrays an initializer may hold; each maps to exactly one `DType`. */
export type TensorData = Float32Array | BigInt64Array | Int32Array;

/** The name, element type and shape of a graph input, output or boundary tensor. */
export interface TensorSpec {
  name: string;
  dtype: DType;
  dims: Dim[];
}

const DTYPE_CODES: Record<DType, number> = {
  float32: onnx.TensorProto.DataType.FLOAT,
  int64: onnx.TensorProto.DataType.INT64,
  int32: onnx.TensorProto.DataType.INT32,
  float16: onnx.TensorProto.DataType.FLOAT16,
  string: onnx.TensorProto.DataType.STRING,
};

/**
 * One node attribute. ONNX distinguishes INT from FLOAT (and lists of each) and kernels
 * reject the wrong one, while a JS number cannot tell `1` from `1.0`, so the type is
 * always explicit: build values with the `attr` helpers.
 */
export type Attr =
  | { kind: 'int'; value: number }
  | { kind: 'float'; value: number }
  | { kind: 'ints'; value: number[] }
  | { kind: 'floats'; value: number[] }
  | { kind: 'string'; value: string };

/** Attributes of one node, by attribute name. */
export type Attrs = Record<string, Attr>;

function checkInt(v: number): number {
  if (!Number.isSafeInteger(v)) throw new RangeError(`INT attribute must be an integer, got ${v}`);
  return v;
}

/** Constructors for typed node attributes, e.g. `{ strides: attr.ints([2, 2]) }`. */
export const attr = {
  int: (value: number): Attr => ({ kind: 'int', value: checkInt(value) }),
  float: (value: number): Attr => ({ kind: 'float', value }),
  ints: (value: readonly number[]): Attr => ({ kind: 'ints', value: value.map(checkInt) }),
  floats: (value: readonly number[]): Attr => ({ kind: 'floats', value: [...value] }),
  string: (value: string): Attr => ({ kind: 'string', value }),
} as const;

function attributeProto(name: string, a: Attr): OnnxTypes.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  switch (a.kind) {
    case 'int':
      return { name, type: T.INT, i: a.value };
    case 'float':
      return { name, type: T.FLOAT, f: a.value };
    case 'ints':
      return { name, type: T.INTS, ints: a.value };
    case 'floats':
      return { name, type: T.FLOATS, floats: a.value };
    case 'string':
      return { name, type: T.STRING, s: new TextEncoder().encode(a.value) };
  }
}

function dtypeOf(data: TensorData): DType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof BigInt64Array) return 'int64';
  return 'int32';
}

// Serialised explicitly little-endian (ONNX raw_data's byte order) rather than copying the
// typed array's buffer, so output does not depend on host endianness.
function rawBytes(data: TensorData): Uint8Array {
  const out = new Uint8Array(data.byteLength);
  const view = new DataView(out.buffer);
  if (data instanceof Float32Array) data.forEach((v, i) => view.setFloat32(i * 4, v, true));
  else if (data instanceof BigInt64Array) data.forEach((v, i) => view.setBigInt64(i * 8, v, true));
  else data.forEach((v, i) => view.setInt32(i * 4, v, true));
  return out;
}

function valueInfo(spec: TensorSpec): OnnxTypes.IValueInfoProto {
  return {
    name: spec.name,
    type: {
      tensorType: {
        elemType: DTYPE_CODES[spec.dtype],
        shape: { dim: spec.dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/** Model-level metadata for `GraphBuilder.toBytes`. */
export interface ModelOptions {
  /** Default 8. */
  irVersion?: number;
  /** Default-domain opset; default 13. */
  opset?: number;
  /** Default 'troupe'. */
  producerName?: string;
  docString?: string;
}

/**
 * Accumulates one ONNX graph. Nodes must be added in topological order; `toBytes`
 * checks that every node input exists before it is used and every output is produced.
 */
export class GraphBuilder {
  private readonly inputs: TensorSpec[] = [];
  private readonly outputs: TensorSpec[] = [];
  private readonly initializers: OnnxTypes.ITensorProto[] = [];
  private readonly nodes: OnnxTypes.INodeProto[] = [];
  private readonly names = new Set<string>();
  private counter = 0;

  /** @param name the graph's name (shows up in tools such as Netron). */
  constructor(readonly name = 'troupe_graph') {}

  private claim(name: string): string {
    if (name === '') throw new Error('tensor names must be non-empty');
    if (this.names.has(name)) throw new Error(`tensor name '${name}' is already defined`);
    this.names.add(name);
    return name;
  }

  /** Declares a graph input; returns its name. */
  input(name: string, dtype: DType, dims: Dim[]): string {
    this.inputs.push({ name: this.claim(name), dtype, dims: [...dims] });
    return name;
  }

  /** Declares a graph output (some node must produce it); returns its name. */
  output(name: string, dtype: DType, dims: Dim[]): string {
    this.outputs.push({ name, dtype, dims: [...dims] });
    return name;
  }

  /** Adds a constant tensor; `dims` may be `[]` for a scalar. Returns its name. */
  initializer(name: string, dims: number[], data: TensorData): string {
    const count = dims.reduce((a, b) => a * b, 1);
    if (data.length !== count) {
      throw new Error(`initializer '${name}': ${data.length} values for dims [${dims.join(', ')}]`);
    }
    this.initializers.push({
      name: this.claim(name),
      dims,
      dataType: DTYPE_CODES[dtypeOf(data)],
      rawData: rawBytes(data),
    });
    return name;
  }

  /** Whether a tensor of this name is already defined (input, initializer or node output). */
  has(name: string): boolean {
    return this.names.has(name);
  }

  /** A name not used so far, for intermediate tensors: `prefix`, or `prefix_<n>`. */
  fresh(prefix: string): string {
    let name = prefix;
    while (this.names.has(name)) name = `${prefix}_${++this.counter}`;
    return name;
  }

  /** Appends a node; returns its output names. Empty strings mark omitted optional inputs. */
  node(opType: string, inputs: string[], outputs: string[], attrs: Attrs = {}): string[] {
    for (const out of outputs) this.claim(out);
    this.nodes.push({
      name: `${opType}_${this.nodes.length}`,
      opType,
      input: inputs,
      output: outputs,
      attribute: Object.entries(attrs).map(([k, v]) => attributeProto(k, v)),
    });
    return outputs;
  }

  private validate(): void {
    const known = new Set<string>([...this.inputs.map((i) => i.name), ...this.initializers.map((t) => t.name ?? '')]);
    for (const n of this.nodes) {
      for (const i of n.input ?? []) {
        if (i !== '' && !known.has(i)) throw new Error(`node ${n.name} reads '${i}' before it is defined`);
      }
      for (const o of n.output ?? []) known.add(o);
    }
    for (const o of this.outputs) {
      if (!known.has(o.name)) throw new Error(`graph output '${o.name}' is never produced`);
    }
  }

  /** The ModelProto as a plain protobufjs object (for inspection or further edits). */
  toModelProto(opts: ModelOptions = {}): OnnxTypes.IModelProto {
    this.validate();
    return {
      irVersion: opts.irVersion ?? 8,
      opsetImport: [{ domain: '', version: opts.opset ?? 13 }],
      producerName: opts.producerName ?? 'troupe',
      ...(opts.docString === undefined ? {} : { docString: opts.docString }),
      graph: {
        name: this.name,
        input: this.inputs.map(valueInfo),
        output: this.outputs.map(valueInfo),
        initializer: this.initializers,
        node: this.nodes,
      },
    };
  }

  /** Serialises the model (ir_version 8, opset 13, producer 'troupe' unless overridden). */
  toBytes(opts: ModelOptions = {}): Uint8Array {
    return onnx.ModelProto.encode(this.toModelProto(opts)).finish();
  }
}

/** Parses ONNX bytes back into a protobufjs ModelProto, e.g. to inspect a built model. */
export function decodeModel(bytes: Uint8Array): OnnxTypes.ModelProto {
  return onnx.ModelProto.decode(bytes);
}
