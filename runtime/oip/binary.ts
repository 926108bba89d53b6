import { TroupeError } from '../errors.js';

/**
 * The binary tensor data extension (Triton's "binary_tensor_data"): the body is a JSON object of
 * `Inference-Header-Content-Length` bytes, followed by each binary tensor's raw bytes in the order
 * the JSON lists them. Tensor bytes are sliced from the body, never copied or turned into JSON.
 */

export const HEADER_LENGTH = 'inference-header-content-length';

export interface SplitBody {
  /** The JSON inference request. */
  json: Buffer;
  /** Everything after it: the binary tensors, back to back. */
  binary: Buffer;
}

/** Splits a request body by its `Inference-Header-Content-Length`; without one, it is all JSON. */
export function splitInferBody(body: Buffer, headerLength: string | string[] | undefined): SplitBody {
  if (headerLength === undefined) return { json: body, binary: body.subarray(body.length) };
  const text = Array.isArray(headerLength) ? headerLength.join(',') : headerLength;
  if (!/^\d{1,15}$/.test(text.trim())) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `Inference-Header-Content-Length must be a whole number of bytes, got '${text.slice(0, 40)}'`,
    );
  }
  const length = Number(text.trim());
  if (length > body.length) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `Inference-Header-Content-Length is ${length} but the body has only ${body.length} bytes`,
    );
  }
  return { json: body.subarray(0, length), binary: body.subarray(length) };
}

/** Hands out the binary section's bytes to the inputs that declare `binary_data_size`, in order. */
export class BinaryReader {
  readonly #binary: Buffer;
  #at = 0;

  constructor(binary: Buffer) {
    this.#binary = binary;
  }

  take(size: number, label: string): Buffer {
    const left = this.#binary.length - this.#at;
    if (size > left) {
      const why =
        this.#binary.length === 0
          ? 'the request has no binary data (is Inference-Header-Content-Length set?)'
          : `only ${left} bytes of binary data are left in the body`;
      throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${label}: binary_data_size is ${size} but ${why}`);
    }
    const bytes = this.#binary.subarray(this.#at, this.#at + size);
    this.#at += size;
    return bytes;
  }

  /** Triton refuses bytes no input claims: they mean the client and server disagree on the layout. */
  finish(): void {
    const left = this.#binary.length - this.#at;
    if (left > 0) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `the body has ${left} bytes of binary data after the inputs' binary_data_size (${this.#at} bytes in all) are taken`,
      );
    }
  }
}

/** BYTES elements in binary form: each a 4-byte little-endian length, then that many bytes. */
export function decodeBytesElements(bytes: Uint8Array, count: number, label: string): string[] {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: string[] = [];
  let at = 0;
  while (at < view.length) {
    if (at + 4 > view.length)
      throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: BYTES element ${out.length} has a truncated 4-byte length`);
    const length = view.readUInt32LE(at);
    at += 4;
    if (at + length > view.length) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_TENSOR',
        `${label}: BYTES element ${out.length} says ${length} bytes but ${view.length - at} are left`,
      );
    }
    out.push(view.toString('utf8', at, at + length));
    at += length;
  }
  if (out.length !== count)
    throw new TroupeError(
      'TROUPE_ERR_BAD_TENSOR',
      `${label}: shape holds ${count} elements, the binary data has ${out.length} BYTES elements`,
    );
  return out;
}

export function encodeBytesElements(strings: readonly string[]): Buffer {
  const parts: Buffer[] = [];
  for (const s of strings) {
    const bytes = Buffer.from(s, 'utf8');
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32LE(bytes.length, 0);
    parts.push(length, bytes);
  }
  return Buffer.concat(parts);
}

/** A response body: the JSON part's bytes, then the binary outputs; `headerLength` goes in the Inference-Header-Content-Length header. */
export function binaryBody(header: Buffer, parts: readonly Uint8Array[]): { body: Buffer; headerLength: number } {
  return { body: Buffer.concat([header, ...parts]), headerLength: header.length };
}
