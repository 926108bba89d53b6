/**
 * The few protobuf reads the ModelInfer codec needs (infer-request-codec.ts), over one received
 * buffer: varints, fixed 32/64-bit values and length-delimited fields, the last returned as
 * `subarray`s of the buffer (no copy). Anything that runs past its message, or a wire type the
 * field cannot have, throws a ProtobufError (answered as a request that is not a protobuf).
 */

export class ProtobufError extends Error {}

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_BYTES = 2;
export const WIRE_FIXED32 = 5;

const TWO_32 = 2 ** 32;

export class ProtobufReader {
  pos: number;

  constructor(
    readonly buf: Buffer,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint's low 32 bits (unsigned) and high 32 bits, in `out`; returns `out`. */
  varint64(out: [number, number]): [number, number] {
    let lo = 0;
    let hi = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError(`a varint runs past the end of its message (at byte ${this.pos})`);
      const b = this.buf[this.pos++]!;
      if (shift < 28) lo |= (b & 0x7f) << shift;
      else if (shift === 28) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (shift - 32);
      if (b < 0x80) {
        out[0] = lo >>> 0;
        out[1] = hi >>> 0;
        return out;
      }
      shift += 7;
    }
    throw new ProtobufError(`a varint is longer than 10 bytes (at byte ${this.pos})`);
  }

  readonly #pair: [number, number] = [0, 0];

  /** A varint as an unsigned number; exact to 2^53 (lengths, tags, counts). */
  uint(): number {
    const [lo, hi] = this.varint64(this.#pair);
    return hi * TWO_32 + lo;
  }

  /** An int32 varint (negative ones come as 10-byte varints; the low 32 bits are the value). */
  int32(): number {
    return this.varint64(this.#pair)[0] | 0;
  }

  /** A uint32 varint (its low 32 bits, as protobuf truncates a wider one). */
  uint32(): number {
    return this.varint64(this.#pair)[0];
  }

  /** An int64 varint as a number (two's complement; exact within ±2^53). */
  int64(): number {
    const [lo, hi] = this.varint64(this.#pair);
    return hi & 0x80000000 ? -((~hi >>> 0) * TWO_32 + (~lo >>> 0) + 1) : hi * TWO_32 + lo;
  }

  /** An int64 or uint64 varint as its decimal digits (every digit kept). */
  int64Text(signed: boolean): string {
    const [lo, hi] = this.varint64(this.#pair);
    const n = (BigInt(hi) << 32n) | BigInt(lo);
    return String(signed ? BigInt.asIntN(64, n) : n);
  }

  /** A length-delimited field's bounds [start, end), checked against the message's end; moves past it. */
  span(): [number, number] {
    const length = this.uint();
    const start = this.pos;
    if (length > this.end - start)
      throw new ProtobufError(`a field declares ${length} bytes where ${this.end - start} are left (at byte ${start})`);
    this.pos = start + length;
    return [start, this.pos];
  }

  bytes(): Buffer {
    const [start, end] = this.span();
    return this.buf.subarray(start, end);
  }

  string(): string {
    const [start, end] = this.span();
    return this.buf.toString('utf8', start, end);
  }

  float(): number {
    this.#need(4);
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return v;
  }

  double(): number {
    this.#need(8);
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }

  /** Passes over a field of an unknown number. */
  skip(wire: number): void {
    switch (wire) {
      case WIRE_VARINT:
        this.varint64(this.#pair);
        return;
      case WIRE_FIXED64:
        this.#need(8);
        this.pos += 8;
        return;
      case WIRE_BYTES:
        this.span();
        return;
      case WIRE_FIXED32:
        this.#need(4);
        this.pos += 4;
        return;
      default:
        throw new ProtobufError(`wire type ${wire} is not one this service uses (at byte ${this.pos})`);
    }
  }

  /** The next field's number and wire type. */
  tag(): [field: number, wire: number] {
    const tag = this.uint();
    const field = Math.floor(tag / 8);
    if (field === 0) throw new ProtobufError(`field number 0 is not a protobuf field (at byte ${this.pos})`);
    return [field, tag & 7];
  }

  #need(n: number): void {
    if (this.end - this.pos < n) throw new ProtobufError(`a ${n}-byte value runs past the end of its message (at byte ${this.pos})`);
  }
}

/** Throws unless a known field came with the wire type its declaration gives it. */
export function expectWire(field: string, wire: number, expected: number): void {
  if (wire !== expected) throw new ProtobufError(`field '${field}' has wire type ${wire}, its type has ${expected}`);
}
