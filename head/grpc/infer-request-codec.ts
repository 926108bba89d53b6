import { ProtobufReader, WIRE_BYTES, WIRE_FIXED32, WIRE_FIXED64, WIRE_VARINT, expectWire } from './protobuf-reader.js';
import type { InferParameter, ModelInferRequest, TensorContents } from './messages.js';

/**
 * ModelInferRequest straight from its protobuf bytes (proto/grpc_service.proto), in the shape
 * @grpc/proto-loader gives with the service's options (service-definition.ts): snake_case names,
 * every field present at its default, 64-bit contents and parameters as decimal strings. Shapes
 * come as numbers. raw_input_contents and BYTES contents are slices of the received buffer, not
 * copies. The hot path of every inference: no reflection, no intermediate objects.
 */

type Params = Record<string, InferParameter>;

const PARAMETER_CHOICES = ['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'] as const;

function parameter(inner: ProtobufReader): InferParameter {
  const p: InferParameter = {};
  while (!inner.done) {
    const [field, wire] = inner.tag();
    const choice = PARAMETER_CHOICES[field - 1];
    if (!choice) {
      inner.skip(wire);
      continue;
    }
    // A oneof: the last of its fields wins, as protobuf says.
    for (const other of PARAMETER_CHOICES) delete p[other];
    p.parameter_choice = choice;
    switch (choice) {
      case 'bool_param':
        expectWire(choice, wire, WIRE_VARINT);
        p.bool_param = inner.uint() !== 0;
        break;
      case 'int64_param':
      case 'uint64_param':
        expectWire(choice, wire, WIRE_VARINT);
        p[choice] = inner.int64Text(choice === 'int64_param');
        break;
      case 'string_param':
        expectWire(choice, wire, WIRE_BYTES);
        p.string_param = inner.string();
        break;
      case 'double_param':
        expectWire(choice, wire, WIRE_FIXED64);
        p.double_param = inner.double();
        break;
    }
  }
  return p;
}

/** A map's object: no prototype, so a key such as `__proto__` is a key like any other. */
const paramsObject = (): Params => Object.create(null) as Params;

/** One entry of a map<string, InferParameter> into `into`. */
function parameterEntry(r: ProtobufReader, into: Params): void {
  const [start, end] = r.span();
  const entry = new ProtobufReader(r.buf, start, end);
  let key = '';
  let value: InferParameter = {};
  while (!entry.done) {
    const [field, wire] = entry.tag();
    if (field === 1) {
      expectWire('parameters key', wire, WIRE_BYTES);
      key = entry.string();
    } else if (field === 2) {
      expectWire('parameters value', wire, WIRE_BYTES);
      const [vs, ve] = entry.span();
      value = parameter(new ProtobufReader(entry.buf, vs, ve));
    } else entry.skip(wire);
  }
  into[key] = value;
}

function emptyContents(): TensorContents {
  return {
    bool_contents: [],
    int_contents: [],
    int64_contents: [],
    uint_contents: [],
    uint64_contents: [],
    fp32_contents: [],
    fp64_contents: [],
    bytes_contents: [],
  };
}

/** Reads one element of a repeated scalar field of `contents` (field 1-7). */
function scalar(r: ProtobufReader, field: number, c: TensorContents): void {
  switch (field) {
    case 1:
      c.bool_contents.push(r.uint() !== 0);
      return;
    case 2:
      c.int_contents.push(r.int32());
      return;
    case 3:
      c.int64_contents.push(r.int64Text(true));
      return;
    case 4:
      c.uint_contents.push(r.uint32());
      return;
    case 5:
      c.uint64_contents.push(r.int64Text(false));
      return;
    case 6:
      c.fp32_contents.push(r.float());
      return;
    default:
      c.fp64_contents.push(r.double());
  }
}

const SCALAR_WIRE = [0, WIRE_VARINT, WIRE_VARINT, WIRE_VARINT, WIRE_VARINT, WIRE_VARINT, WIRE_FIXED32, WIRE_FIXED64];

function contents(r: ProtobufReader, start: number, end: number): TensorContents {
  const c = emptyContents();
  const m = new ProtobufReader(r.buf, start, end);
  while (!m.done) {
    const [field, wire] = m.tag();
    if (field === 8) {
      expectWire('bytes_contents', wire, WIRE_BYTES);
      c.bytes_contents.push(m.bytes());
    } else if (field >= 1 && field <= 7) {
      // Repeated scalars come packed (one length-delimited run) or one by one; both are protobuf.
      if (wire === WIRE_BYTES) {
        const [ps, pe] = m.span();
        const packed = new ProtobufReader(m.buf, ps, pe);
        while (!packed.done) scalar(packed, field, c);
      } else {
        expectWire(`contents field ${field}`, wire, SCALAR_WIRE[field]!);
        scalar(m, field, c);
      }
    } else m.skip(wire);
  }
  return c;
}

type Input = ModelInferRequest['inputs'][number];

function input(r: ProtobufReader, start: number, end: number): Input {
  const t: Input = { name: '', datatype: '', shape: [], parameters: paramsObject(), contents: null };
  const m = new ProtobufReader(r.buf, start, end);
  while (!m.done) {
    const [field, wire] = m.tag();
    switch (field) {
      case 1:
        expectWire('inputs.name', wire, WIRE_BYTES);
        t.name = m.string();
        break;
      case 2:
        expectWire('inputs.datatype', wire, WIRE_BYTES);
        t.datatype = m.string();
        break;
      case 3:
        if (wire === WIRE_BYTES) {
          const [ps, pe] = m.span();
          const packed = new ProtobufReader(m.buf, ps, pe);
          while (!packed.done) t.shape.push(packed.int64());
        } else {
          expectWire('inputs.shape', wire, WIRE_VARINT);
          t.shape.push(m.int64());
        }
        break;
      case 4:
        expectWire('inputs.parameters', wire, WIRE_BYTES);
        parameterEntry(m, t.parameters);
        break;
      case 5: {
        expectWire('inputs.contents', wire, WIRE_BYTES);
        const [cs, ce] = m.span();
        t.contents = contents(m, cs, ce);
        break;
      }
      default:
        m.skip(wire);
    }
  }
  return t;
}

type Output = ModelInferRequest['outputs'][number];

function output(r: ProtobufReader, start: number, end: number): Output {
  const o: Output = { name: '', parameters: paramsObject() };
  const m = new ProtobufReader(r.buf, start, end);
  while (!m.done) {
    const [field, wire] = m.tag();
    if (field === 1) {
      expectWire('outputs.name', wire, WIRE_BYTES);
      o.name = m.string();
    } else if (field === 2) {
      expectWire('outputs.parameters', wire, WIRE_BYTES);
      parameterEntry(m, o.parameters);
    } else m.skip(wire);
  }
  return o;
}

/**
 * The bytes [start, end) of `buf`, moved back in place, over bytes already read (their field's tag
 * and length, at least), to the widest alignment (8, 4, 2) that the room since `free` allows. A
 * tensor's bytes land wherever the client's encoding put them, and a typed array over misaligned
 * bytes is a copy (viewBytes): a new allocation of the whole tensor, 588 KiB for an image. The
 * message is this call's own (grpc-js joins each into a new buffer) and nothing else holds those bytes.
 */
function alignedSlice(buf: Buffer, start: number, end: number, free: number): Buffer {
  const at = buf.byteOffset + start;
  for (const align of [8, 4, 2]) {
    const shift = at % align;
    if (shift === 0) break;
    if (shift <= start - free) {
      buf.copyWithin(start - shift, start, end);
      return buf.subarray(start - shift, end - shift);
    }
  }
  return buf.subarray(start, end);
}

/** Decodes a ModelInferRequest; throws ProtobufError for bytes that are not one. */
export function decodeModelInferRequest(buf: Buffer): ModelInferRequest {
  const request: ModelInferRequest = {
    model_name: '',
    model_version: '',
    id: '',
    parameters: paramsObject(),
    inputs: [],
    outputs: [],
    raw_input_contents: [],
  };
  const r = new ProtobufReader(buf);
  // Where the bytes no slice handed out covers begin (strings are copied out as they are read).
  let free = 0;
  while (!r.done) {
    const [field, wire] = r.tag();
    switch (field) {
      case 1:
        expectWire('model_name', wire, WIRE_BYTES);
        request.model_name = r.string();
        break;
      case 2:
        expectWire('model_version', wire, WIRE_BYTES);
        request.model_version = r.string();
        break;
      case 3:
        expectWire('id', wire, WIRE_BYTES);
        request.id = r.string();
        break;
      case 4:
        expectWire('parameters', wire, WIRE_BYTES);
        parameterEntry(r, request.parameters);
        break;
      case 5: {
        expectWire('inputs', wire, WIRE_BYTES);
        const [s, e] = r.span();
        request.inputs.push(input(r, s, e));
        // BYTES contents are slices of it.
        free = r.pos;
        break;
      }
      case 6: {
        expectWire('outputs', wire, WIRE_BYTES);
        const [s, e] = r.span();
        request.outputs.push(output(r, s, e));
        break;
      }
      case 7: {
        expectWire('raw_input_contents', wire, WIRE_BYTES);
        const [s, e] = r.span();
        request.raw_input_contents.push(alignedSlice(buf, s, e, free));
        free = r.pos;
        break;
      }
      default:
        r.skip(wire);
    }
  }
  return request;
}
