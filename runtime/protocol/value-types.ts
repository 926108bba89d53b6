import { addExtension } from 'msgpackr';

/**
 * The msgpack extensions that carry the JavaScript values plain msgpack cannot: typed arrays other
 * than bytes, ArrayBuffer, DataView, Set, Map and -0. Each arrives as the type it left as, with
 * exactly its bytes. (msgpackr's own handling wrote a Float32Array as a bin of its byte length
 * filled element by element, then whatever its buffer held: issue 39.)
 *
 * Map and -0 need a sender's help: msgpackr writes a Map as a plain msgpack map and -0 as the
 * integer 0 before any extension is asked, so values.ts turns them into {@link MapEntries} and
 * {@link NEGATIVE_ZERO} on the way out. A process that only forwards values (the head) decodes
 * them back into those forms ({@link decodingForForwarding}), so that sending them on keeps them.
 */

/** msgpack ext type of a binary value written inline: kind byte, then its bytes. */
export const EXT_BINARY = 0x55;
/** msgpack ext type of a binary value whose bytes follow the frame's body: kind byte, u32 offset, u32 length. */
export const EXT_BINARY_EXTERNAL = 0x56;
const EXT_SET = 0x57;
const EXT_MAP = 0x58;
const EXT_NEGATIVE_ZERO = 0x59;

/** The typed arrays that travel by kind (Uint8Array travels as msgpack bin, see codec.ts). */
export const TYPED_ARRAY_CLASSES = [
  Int8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
] as const;
const KIND_ARRAY_BUFFER = TYPED_ARRAY_CLASSES.length;
const KIND_DATA_VIEW = KIND_ARRAY_BUFFER + 1;
const KIND_UINT8_ARRAY = KIND_DATA_VIEW + 1;
const KIND_BUFFER = KIND_UINT8_ARRAY + 1;

/**
 * A user's byte array, marked by its sender (values.ts): the runtime's own byte arrays (tensor
 * data) travel as msgpack bin and are read as views of the frame, without a copy; a user's arrive
 * as a copy of their own, as the class they left as (`Uint8Array` or `Buffer`).
 */
export class UserBytes {
  constructor(readonly bytes: Uint8Array) {}
}

type BinaryValue = Exclude<ArrayBufferView, Uint8Array> | ArrayBuffer;

/** The kind byte of a binary value, or -1 for a class not carried (a typed array of a future Node, say). */
export function binaryKind(value: BinaryValue | UserBytes): number {
  if (value instanceof UserBytes) return Buffer.isBuffer(value.bytes) ? KIND_BUFFER : KIND_UINT8_ARRAY;
  if (value instanceof ArrayBuffer) return KIND_ARRAY_BUFFER;
  if (value instanceof DataView) return KIND_DATA_VIEW;
  return TYPED_ARRAY_CLASSES.findIndex((Ctor) => Object.getPrototypeOf(value) === Ctor.prototype);
}

/** The bytes of a binary value, without copying. */
export function bytesOfBinary(value: BinaryValue | UserBytes): Uint8Array {
  if (value instanceof UserBytes) return value.bytes;
  return value instanceof ArrayBuffer ? new Uint8Array(value) : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

/**
 * Rebuilds a binary value of `kind` from its bytes. Always a copy, in a buffer of its own: a view
 * into the frame would show its receiver the other bytes of the message through `.buffer`, and a
 * pooled frame's buffer is reused for later messages.
 */
export function binaryFromBytes(kind: number, bytes: Uint8Array): unknown {
  // A plain Uint8Array copy: msgpackr hands over Buffers, whose slice is a view and whose species is Buffer.
  const own = new Uint8Array(bytes);
  if (kind === KIND_UINT8_ARRAY) return forwarding ? new UserBytes(own) : own;
  if (kind === KIND_BUFFER) {
    const buffer = Buffer.from(own.buffer, 0, own.byteLength);
    return forwarding ? new UserBytes(buffer) : buffer;
  }
  if (kind === KIND_ARRAY_BUFFER) return own.buffer;
  if (kind === KIND_DATA_VIEW) return new DataView(own.buffer);
  const Ctor = TYPED_ARRAY_CLASSES[kind];
  if (!Ctor) throw new Error(`unknown binary kind ${kind}`);
  if (own.byteLength % Ctor.BYTES_PER_ELEMENT !== 0) {
    throw new Error(`${Ctor.name} of ${own.byteLength} bytes is not whole elements of ${Ctor.BYTES_PER_ELEMENT}`);
  }
  return new Ctor(own.buffer);
}

/** A Map on the wire: its entries, keys and values alternating. */
export class MapEntries {
  constructor(readonly flat: unknown[]) {}
}

/** -0 on the wire (msgpackr would write the integer 0). */
export const NEGATIVE_ZERO = Object.freeze(new (class NegativeZero {})());

let forwarding = false;

/**
 * Runs `decode` so that Maps and -0 come out as {@link MapEntries} and {@link NEGATIVE_ZERO}:
 * for a process that sends what it receives on, untouched (the head).
 */
export function decodingForForwarding<T>(forward: boolean, decode: () => T): T {
  if (!forward) return decode();
  forwarding = true;
  try {
    return decode();
  } finally {
    forwarding = false;
  }
}

// msgpackr's extension API: `write` returns a value packed after the type tag, `read` gets it back.
// Its type declarations omit `write` and `read`, hence the casts.
type Extension = Parameters<typeof addExtension>[0];

addExtension({
  Class: Set,
  type: EXT_SET,
  write: (set: Set<unknown>) => [...set],
  read: (items: unknown[]) => new Set(items),
} as unknown as Extension);

addExtension({
  Class: MapEntries,
  type: EXT_MAP,
  write: (map: MapEntries) => map.flat,
  read: (flat: unknown[]) => {
    if (!Array.isArray(flat) || flat.length % 2 !== 0) throw new Error('a Map must be an even list of keys and values');
    if (forwarding) return new MapEntries(flat);
    const map = new Map<unknown, unknown>();
    for (let i = 0; i < flat.length; i += 2) map.set(flat[i], flat[i + 1]);
    return map;
  },
} as unknown as Extension);

addExtension({
  Class: NEGATIVE_ZERO.constructor,
  type: EXT_NEGATIVE_ZERO,
  write: () => 0,
  read: () => (forwarding ? NEGATIVE_ZERO : -0),
} as unknown as Extension);

const EXT_CALL_REFERENCE = 0x5a;

/**
 * A Future of an actor call found inside an argument (not at its top level): the head puts the
 * call's value in its place before the method runs (runtime/protocol/call-references.ts).
 */
export class CallReference {
  constructor(readonly call: string) {}
}

addExtension({
  Class: CallReference,
  type: EXT_CALL_REFERENCE,
  write: (ref: CallReference) => ref.call,
  read: (call: unknown) => {
    if (typeof call !== 'string') throw new Error('a call reference must name its call');
    return new CallReference(call);
  },
} as unknown as Extension);

const EXT_ACTOR_REFERENCE = 0x5b;

/**
 * An ActorHandle as a value (Ray's handles passed to tasks and actors): the actor's name and the
 * handle's session, nothing of the client that made it. A process that runs methods turns it back
 * into a handle on its own client ({@link readActorReferencesWith}); one that forwards keeps it.
 */
export class ActorReference {
  constructor(
    readonly actor: string,
    readonly sessionKey?: string,
  ) {}
}

/**
 * The method a value's class may define to say what it crosses as (an ActorHandle: its
 * ActorReference), since values.ts cannot know the SDK's classes.
 */
export const WIRE_FORM = Symbol.for('troupe.wireForm');

let referenceReader: ((ref: ActorReference) => unknown) | undefined;

/** What decoded actor references become in this process (a class actor: handles on its own client). */
export function readActorReferencesWith(reader: ((ref: ActorReference) => unknown) | undefined): void {
  referenceReader = reader;
}

addExtension({
  Class: ActorReference,
  type: EXT_ACTOR_REFERENCE,
  write: (ref: ActorReference) => (ref.sessionKey === undefined ? [ref.actor] : [ref.actor, ref.sessionKey]),
  read: (raw: unknown) => {
    if (
      !Array.isArray(raw) ||
      raw.length < 1 ||
      raw.length > 2 ||
      !raw.every((p) => typeof p === 'string' && p.length > 0 && p.length <= 256)
    )
      throw new Error('an actor reference is [name] or [name, sessionKey]');
    const ref = new ActorReference(raw[0] as string, raw[1] as string | undefined);
    return !forwarding && referenceReader ? referenceReader(ref) : ref;
  },
} as unknown as Extension);
