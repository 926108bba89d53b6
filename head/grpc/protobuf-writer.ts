import { WIRE_BYTES } from './protobuf-reader.js';

/**
 * The few protobuf writes the ModelInfer codec needs (infer-response-codec.ts), into one buffer
 * that grows by doubling: a response's raw outputs are copied once, into the message, and nothing
 * else is allocated per field. Fields at their default (an empty string) are left out, as proto3
 * encoders do.
 */
export class ProtobufWriter {
  #buf: Buffer;
  #pos = 0;

  constructor(sizeHint = 256) {
    this.#buf = Buffer.allocUnsafe(Math.max(16, sizeHint));
  }

  #room(n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#pos + n));
    this.#buf.copy(grown, 0, 0, this.#pos);
    this.#buf = grown;
  }

  /** A varint of a whole number in [0, 2^53). */
  uint(n: number): void {
    this.#room(10);
    while (n >= 0x80) {
      this.#buf[this.#pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.#buf[this.#pos++] = n;
  }

  /** A 64-bit varint of a value in [-2^63, 2^64) (negative ones as two's complement: 10 bytes). */
  big(n: bigint): void {
    let v = BigInt.asUintN(64, n);
    this.#room(10);
    while (v >= 0x80n) {
      this.#buf[this.#pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.#buf[this.#pos++] = Number(v);
  }

  /** An int32 varint: a negative value is sign-extended to 64 bits, as protobuf says. */
  int32(n: number): void {
    if (n >= 0) this.uint(n);
    else this.big(BigInt(n));
  }

  tag(field: number, wire: number): void {
    this.uint(field * 8 + wire);
  }

  bytesField(field: number, bytes: Uint8Array): void {
    this.tag(field, WIRE_BYTES);
    this.uint(bytes.byteLength);
    this.#room(bytes.byteLength);
    this.#buf.set(bytes, this.#pos);
    this.#pos += bytes.byteLength;
  }

  stringField(field: number, text: string): void {
    if (text === '') return;
    const length = Buffer.byteLength(text);
    this.tag(field, WIRE_BYTES);
    this.uint(length);
    this.#room(length);
    this.#pos += this.#buf.write(text, this.#pos, 'utf8');
  }

  /** A packed run of fixed-size values: `each` writes one value at an offset. */
  packedFixed<T>(field: number, values: readonly T[], size: 4 | 8, each: (buf: Buffer, value: T, at: number) => void): void {
    if (values.length === 0) return;
    this.tag(field, WIRE_BYTES);
    this.uint(values.length * size);
    this.#room(values.length * size);
    for (const value of values) {
      each(this.#buf, value, this.#pos);
      this.#pos += size;
    }
  }

  /** A nested message (or packed varints), written by `body` into a writer of its own, then as bytes. */
  nested(field: number, body: (w: ProtobufWriter) => void, sizeHint = 64): void {
    const inner = new ProtobufWriter(sizeHint);
    body(inner);
    this.bytesField(field, inner.finish());
  }

  finish(): Buffer {
    return this.#buf.subarray(0, this.#pos);
  }
}
