import { TroupeError } from '../errors.js';
import type { BufferPool } from './buffer-pool.js';

/** Each frame on a stream is preceded by its length, a big-endian u32. */
export const LENGTH_PREFIX_BYTES = 4;
/**
 * Reads this short or shorter go through the scratch buffer, so that one read can also take the
 * next frame's length and the start of its body; longer reads land in the frame itself.
 */
const IN_PLACE_MIN_BYTES = 64 * 1024;
const SCRATCH_BYTES = 64 * 1024;
/**
 * A frame's buffer is first at most this long, and grows {@link GROW_FACTOR}-fold as its bytes
 * arrive: a peer that declares 255 MiB and sends nothing must not make this process hold 255 MiB.
 * Frames up to this size (600 KB images, the common case) still get their whole buffer at once;
 * a longer one is copied about a third of its length more in all (1 + 1/4 + 1/16 ...).
 */
const FIRST_PART_BYTES = 1024 * 1024;
const GROW_FACTOR = 4;

/** Where a reader's frames go; set by the stream that owns it, which exists only after its socket. */
export interface FrameReaderHandlers {
  /** A whole frame, with its release when it came from the pool. */
  onFrame(frame: Buffer, release: (() => void) | undefined): void;
  /** The stream broke the framing (an empty or oversized frame); nothing more is read. */
  onError(error: TroupeError): void;
}

/**
 * Cuts a byte stream into length-prefixed frames, each delivered as one buffer. A frame's bytes
 * are read straight into its own buffer once its length is known ({@link nextBuffer} tells the
 * socket where to read to), so a 600 KB image is copied once, by the kernel, into memory that is
 * reused for a later frame: no 64 KB chunks to allocate, gather and copy again.
 */
export class FrameReader {
  /** Longest frame accepted; may change between frames (raised once a peer authenticated). */
  maxFrameBytes: number;
  handlers: FrameReaderHandlers | undefined;
  /** Where frame buffers come from; without one, each frame is an allocation of its own. */
  readonly #pool: BufferPool | undefined;
  readonly #scratch = Buffer.allocUnsafeSlow(SCRATCH_BYTES);
  readonly #length = Buffer.alloc(LENGTH_PREFIX_BYTES);
  #lengthFilled = 0;
  /** The frame being read: its buffer so far (shorter than `#expected` while it grows), and its length. */
  #frame: Buffer | null = null;
  #expected = 0;
  #filled = 0;
  #broken = false;

  constructor(maxFrameBytes: number, pool: BufferPool | undefined) {
    this.maxFrameBytes = maxFrameBytes;
    this.#pool = pool;
  }

  /** Where the socket's next read should land: the rest of a long frame, or the scratch buffer. */
  nextBuffer(): Uint8Array {
    let frame = this.#frame;
    if (frame && this.#filled === frame.length) frame = this.#grow();
    if (frame && frame.length - this.#filled >= IN_PLACE_MIN_BYTES) return frame.subarray(this.#filled);
    return this.#scratch;
  }

  /** The socket read `n` bytes into `buffer`, which {@link nextBuffer} returned. */
  read(n: number, buffer: Uint8Array): void {
    if (buffer === this.#scratch) {
      this.consume(this.#scratch.subarray(0, n));
      return;
    }
    this.#filled += n;
    if (this.#filled === this.#expected) this.#deliver();
  }

  /** Bytes that arrived in a buffer of their own (sockets Node reads into fresh chunks). */
  consume(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length && !this.#broken) {
      let frame = this.#frame;
      if (!frame) {
        const n = Math.min(LENGTH_PREFIX_BYTES - this.#lengthFilled, chunk.length - at);
        this.#length.set(chunk.subarray(at, at + n), this.#lengthFilled);
        this.#lengthFilled += n;
        at += n;
        if (this.#lengthFilled === LENGTH_PREFIX_BYTES) this.#begin(this.#length.readUInt32BE(0));
        continue;
      }
      if (this.#filled === frame.length) frame = this.#grow();
      if (!frame) return;
      const n = Math.min(frame.length - this.#filled, chunk.length - at);
      frame.set(chunk.subarray(at, at + n), this.#filled);
      this.#filled += n;
      at += n;
      if (this.#filled === this.#expected) this.#deliver();
    }
  }

  #begin(length: number): void {
    this.#lengthFilled = 0;
    if (length === 0 || length > this.maxFrameBytes) {
      this.#broken = true;
      const why = length === 0 ? 'an empty frame' : `a frame of ${length} bytes, over the limit of ${this.maxFrameBytes}`;
      this.handlers?.onError(new TroupeError('TROUPE_ERR_BAD_FRAME', `stream sent ${why}; closing it`));
      return;
    }
    this.#expected = length;
    this.#filled = 0;
    this.#frame = this.#take(Math.min(length, FIRST_PART_BYTES));
  }

  /** The frame's buffer, grown to hold more of its bytes (the last step is exactly its length). */
  #grow(): Buffer | null {
    const part = this.#frame!;
    const next = this.#take(Math.min(this.#expected, part.length * GROW_FACTOR));
    if (next) {
      next.set(part.subarray(0, this.#filled));
      this.#pool?.give(part);
    }
    this.#frame = next;
    return next;
  }

  #take(bytes: number): Buffer | null {
    try {
      // Unpooled frames a caller may keep: exact allocations, small ones from Node's slab.
      return this.#pool ? this.#pool.take(bytes) : Buffer.allocUnsafe(bytes);
    } catch (err) {
      // A process short of memory refuses the allocation, which must close this stream, not end the process.
      this.#broken = true;
      this.handlers?.onError(
        new TroupeError(
          'TROUPE_ERR_BAD_FRAME',
          `stream sent a frame of ${this.#expected} bytes, which this process cannot allocate (${(err as Error).message}); closing it`,
        ),
      );
      return null;
    }
  }

  #deliver(): void {
    const frame = this.#frame!;
    this.#frame = null;
    const pool = this.#pool;
    let released = false;
    const release = pool
      ? () => {
          if (released) return;
          released = true;
          pool.give(frame);
        }
      : undefined;
    this.handlers?.onFrame(frame, release);
  }
}
