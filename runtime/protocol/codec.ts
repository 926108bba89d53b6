import { Packr, addExtension } from 'msgpackr';
import { TroupeError } from '../errors.js';
import {
  EXT_BINARY,
  EXT_BINARY_EXTERNAL,
  TYPED_ARRAY_CLASSES,
  UserBytes,
  binaryFromBytes,
  binaryKind,
  bytesOfBinary,
  decodingForForwarding,
} from './value-types.js';

// Plain maps, no msgpackr records: every peer (and any future non-Node client) reads plain
// msgpack. Binary payloads decode as views into the frame, so tensor bytes are not copied.
// BigInts past 64 bits travel as msgpackr's BigInt extension (within 64 bits, as msgpack int64/uint64,
// which decode as BigInt again); values.ts says what else can cross.
const packr = new Packr({ useRecords: false, mapsAsObjects: true, useBigIntExtension: true });

/** Default cap on one frame; a frame over it closes the socket (ws `maxPayload`). */
export const DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024;

/**
 * Byte arrays at least this large travel outside the msgpack body (see {@link encodeFrameParts}):
 * copying them into msgpack's buffer (which grows fourfold when it fills) costs a copy and, with
 * images, enough garbage to keep the collector busy on a forwarding head.
 */
export const EXTERNAL_BYTES_THRESHOLD = 16 * 1024;

/** First byte of a frame whose large byte arrays follow its msgpack body. 0xc1 is never valid msgpack. */
const SPLIT_FRAME = 0xc1;
/** msgpack ext type of a reference to bytes after the body: u32 offset, u32 length. */
const EXT_EXTERNAL = 0x54;

/**
 * External arrays start at multiples of this in the received message (ws hands a fragmented
 * message over as one fresh buffer), so the receiver can view them as any typed array in place
 * instead of copying each misaligned one.
 */
const PART_ALIGN = 8;
const ZEROS = new Uint8Array(PART_ALIGN);
const aligned = (n: number) => Math.ceil(n / PART_ALIGN) * PART_ALIGN;

/** Where the encoder puts large byte arrays while it packs one frame (null: inline everything). */
let collecting: { parts: Uint8Array[]; bytes: number } | null = null;
/** The bytes after the body of the frame being decoded. */
let decodingPayload: Uint8Array | null = null;

type Allocate = (size: number) => { target: Uint8Array; position: number };

/** Moves `bytes` after the frame's body, returning where they will be (the body is written meanwhile). */
function collectExternal(bytes: Uint8Array): number {
  const gathered = collecting!;
  const pad = aligned(gathered.bytes) - gathered.bytes;
  if (pad > 0) {
    gathered.parts.push(ZEROS.subarray(0, pad));
    gathered.bytes += pad;
  }
  const offset = gathered.bytes;
  gathered.parts.push(bytes);
  gathered.bytes += bytes.byteLength;
  return offset;
}

/** The bytes after the body at `data` (u32 offset, u32 length), checked against the frame. */
function externalBytes(data: Uint8Array, at: number): Uint8Array {
  if (!decodingPayload) throw new Error('external bytes outside a split frame');
  const view = new DataView(data.buffer, data.byteOffset + at, 8);
  const offset = view.getUint32(0);
  const length = view.getUint32(4);
  if (offset + length > decodingPayload.byteLength) throw new Error(`external bytes ${offset}+${length} beyond the frame`);
  return decodingPayload.subarray(offset, offset + length);
}

/** Writes a msgpack header of `type` for `n` bytes of data: bin (type null) or ext. */
function writeHeader(allocate: Allocate, type: number | null, n: number): { target: Uint8Array; position: number } {
  const head = (n < 0x100 ? 2 : n < 0x10000 ? 3 : 5) + (type === null ? 0 : 1);
  const { target, position } = allocate(head + n);
  const view = new DataView(target.buffer, target.byteOffset + position, head);
  const code = type === null ? [0xc4, 0xc5, 0xc6] : [0xc7, 0xc8, 0xc9];
  if (n < 0x100) {
    view.setUint8(0, code[0]!);
    view.setUint8(1, n);
  } else if (n < 0x10000) {
    view.setUint8(0, code[1]!);
    view.setUint16(1, n);
  } else {
    view.setUint8(0, code[2]!);
    view.setUint32(1, n);
  }
  if (type !== null) view.setInt8(head - 1, type);
  return { target, position: position + head };
}

// msgpackr calls pack(value, allocateForWrite) at run time; its type declares a narrower signature.
addExtension({
  Class: Uint8Array,
  type: EXT_EXTERNAL,
  pack(value: Uint8Array, allocateForWrite: Allocate) {
    if (collecting && value.byteLength >= EXTERNAL_BYTES_THRESHOLD) {
      const offset = collectExternal(value);
      const { target, position } = allocateForWrite(10);
      const view = new DataView(target.buffer, target.byteOffset + position, 10);
      view.setUint8(0, 0xd7); // fixext 8
      view.setInt8(1, EXT_EXTERNAL);
      view.setUint32(2, offset);
      view.setUint32(6, value.byteLength);
      return;
    }
    // Small arrays stay inline as plain msgpack bin.
    const { target, position } = writeHeader(allocateForWrite, null, value.byteLength);
    target.set(value, position);
  },
  unpack: (data: Uint8Array) => {
    if (data.byteLength !== 8) throw new Error('external bytes reference must be 8 bytes');
    return externalBytes(data, 0);
  },
} as unknown as Parameters<typeof addExtension>[0]);

// Every other typed array, ArrayBuffer and DataView: a kind byte and its bytes (value-types.ts).
for (const Class of [...TYPED_ARRAY_CLASSES, ArrayBuffer, DataView, UserBytes]) {
  addExtension({
    Class,
    type: EXT_BINARY,
    pack(value: ArrayBufferView | ArrayBuffer, allocateForWrite: Allocate) {
      const kind = binaryKind(value as Parameters<typeof binaryKind>[0]);
      const bytes = bytesOfBinary(value as Parameters<typeof bytesOfBinary>[0]);
      if (collecting && bytes.byteLength >= EXTERNAL_BYTES_THRESHOLD) {
        const offset = collectExternal(bytes);
        const { target, position } = writeHeader(allocateForWrite, EXT_BINARY_EXTERNAL, 9);
        const view = new DataView(target.buffer, target.byteOffset + position, 9);
        view.setUint8(0, kind);
        view.setUint32(1, offset);
        view.setUint32(5, bytes.byteLength);
        return;
      }
      const { target, position } = writeHeader(allocateForWrite, EXT_BINARY, bytes.byteLength + 1);
      target[position] = kind;
      target.set(bytes, position + 1);
    },
    unpack: (data: Uint8Array) => {
      if (data.byteLength < 1) throw new Error('binary value without its kind');
      return binaryFromBytes(data[0]!, data.subarray(1));
    },
  } as unknown as Parameters<typeof addExtension>[0]);
}
addExtension({
  type: EXT_BINARY_EXTERNAL,
  unpack: (data: Uint8Array) => {
    if (data.byteLength !== 9) throw new Error('external binary reference must be 9 bytes');
    return binaryFromBytes(data[0]!, externalBytes(data, 1));
  },
} as unknown as Parameters<typeof addExtension>[0]);

/**
 * A frame is a msgpack array of messages: senders coalesce what one tick produced. Large byte
 * arrays (tensor data) are not copied into the msgpack body: the frame is sent as parts
 * (`[0xc1, u32 body length, body, zeros to a multiple of 8]`, then each array as it is, with
 * zeros between them to keep each at a multiple of 8), which a WebSocket sends as fragments of
 * one message without joining them.
 */
export function encodeFrameParts(messages: readonly unknown[]): Uint8Array[] {
  const gathered = { parts: [] as Uint8Array[], bytes: 0 };
  collecting = gathered;
  let body: Buffer;
  try {
    body = packr.pack(messages);
  } catch (err) {
    // Senders check users' values first (values.ts); this is the last line, so that a value that
    // slipped past fails its message instead of the process (a stack overflow, say).
    throw new TroupeError('TROUPE_ERR_UNSENDABLE_VALUE', `a message could not be encoded: ${(err as Error).message}`);
  } finally {
    collecting = null;
  }
  if (gathered.parts.length === 0) return [body];
  const head = Buffer.alloc(aligned(5 + body.byteLength));
  head[0] = SPLIT_FRAME;
  head.writeUInt32BE(body.byteLength, 1);
  head.set(body, 5);
  return [head, ...gathered.parts];
}

/** The whole frame in one buffer (tests and tools; the channel sends {@link encodeFrameParts}). */
export function encodeFrame(messages: readonly unknown[]): Buffer {
  return Buffer.concat(encodeFrameParts(messages));
}

/**
 * Decodes a frame into its messages; anything else is TROUPE_ERR_BAD_FRAME. `forward`: the
 * messages' values will be sent on as they are (value-types.ts decodingForForwarding).
 */
export function decodeFrame(bytes: Uint8Array, forward = false): unknown[] {
  let value: unknown;
  try {
    if (bytes[0] === SPLIT_FRAME) {
      if (bytes.byteLength < 5) throw new Error('split frame shorter than its prefix');
      const bodyLength = new DataView(bytes.buffer, bytes.byteOffset, 5).getUint32(1);
      if (aligned(5 + bodyLength) > bytes.byteLength) throw new Error(`body of ${bodyLength} bytes beyond the frame`);
      decodingPayload = bytes.subarray(aligned(5 + bodyLength));
      value = decodingForForwarding(forward, () => packr.unpack(bytes.subarray(5, 5 + bodyLength)));
    } else value = decodingForForwarding(forward, () => packr.unpack(bytes));
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FRAME', `frame is not valid msgpack: ${(err as Error).message}`);
  } finally {
    decodingPayload = null;
  }
  if (!Array.isArray(value)) {
    throw new TroupeError('TROUPE_ERR_BAD_FRAME', `frame must be a msgpack array of messages, got ${typeof value}`);
  }
  return value;
}
