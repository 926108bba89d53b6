import { Packr } from 'msgpackr';
import { TroupeError } from '../errors.js';

// Plain maps, no msgpackr records: every peer (and any future non-Node client) reads plain
// msgpack. Binary payloads decode as views into the frame, so tensor bytes are not copied.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** Default cap on one frame; a frame over it closes the socket (ws `maxPayload`). */
export const DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024;

/** A frame is a msgpack array of messages: senders coalesce what one tick produced. */
export function encodeFrame(messages: readonly unknown[]): Buffer {
  return packr.pack(messages);
}

/** Decodes a frame into its messages; anything else is TROUPE_ERR_BAD_FRAME. */
export function decodeFrame(bytes: Uint8Array): unknown[] {
  let value: unknown;
  try {
    value = packr.unpack(bytes);
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FRAME', `frame is not valid msgpack: ${(err as Error).message}`);
  }
  if (!Array.isArray(value)) {
    throw new TroupeError('TROUPE_ERR_BAD_FRAME', `frame must be a msgpack array of messages, got ${typeof value}`);
  }
  return value;
}
