/**
 * Large buffers handed back and reused instead of left to the garbage collector.
 *
 * An actor receiving images allocates megabytes a second; V8 counts each such ArrayBuffer as
 * external memory and answers with a full mark-compact every few megabytes. Measured over a
 * socket carrying 600 KB images, fresh buffers cost the receiver 5x the CPU of reused ones, most
 * of it on V8's collector threads, which on a busy machine run on the cores the models need.
 *
 * Buffers come in power-of-two size classes from {@link MIN_POOLED_BYTES} up; smaller requests are
 * plain allocations (Node's own slab serves them cheaply). A buffer taken and never given back is
 * simply collected: giving back is an optimisation, never an obligation.
 */
export const MIN_POOLED_BYTES = 16 * 1024;
/** Above this a request is a plain allocation: a buffer this large is rare, and costly to keep. */
export const MAX_POOLED_BYTES = 256 * 1024 * 1024;

const classOf = (bytes: number) => 2 ** Math.ceil(Math.log2(Math.max(bytes, MIN_POOLED_BYTES)));

export class BufferPool {
  readonly #free = new Map<number, ArrayBuffer[]>();
  readonly #maxRetainedBytes: number;
  #retainedBytes = 0;

  /** `maxRetainedBytes`: at most this much is kept for reuse; buffers given back past it are dropped. */
  constructor(maxRetainedBytes = 128 * 1024 * 1024) {
    this.#maxRetainedBytes = maxRetainedBytes;
  }

  /** Bytes held for reuse now. */
  get retainedBytes(): number {
    return this.#retainedBytes;
  }

  /**
   * A buffer of exactly `bytes` bytes, not zeroed. Pooled sizes start at offset 0 of an ArrayBuffer
   * of their class; small ones come from Node's slab, large ones are plain allocations.
   */
  take(bytes: number): Buffer {
    if (bytes < MIN_POOLED_BYTES) return Buffer.allocUnsafe(bytes);
    if (bytes > MAX_POOLED_BYTES) return Buffer.allocUnsafeSlow(bytes);
    const size = classOf(bytes);
    const reused = this.#free.get(size)?.pop();
    if (reused) {
      this.#retainedBytes -= size;
      return Buffer.from(reused, 0, bytes);
    }
    // Its own ArrayBuffer of the class's size, left unzeroed: every byte is written before use.
    return Buffer.allocUnsafeSlow(size).subarray(0, bytes);
  }

  /**
   * Hands a buffer from {@link take} back. The caller promises nothing reads or writes it any
   * more; giving back the same buffer twice is ignored rather than handing it out twice.
   */
  give(buffer: Uint8Array): void {
    const ab = buffer.buffer;
    const size = ab.byteLength;
    if (!(ab instanceof ArrayBuffer) || size < MIN_POOLED_BYTES || size !== classOf(size) || size > MAX_POOLED_BYTES) return;
    if (this.#retainedBytes + size > this.#maxRetainedBytes) return;
    let list = this.#free.get(size);
    if (!list) this.#free.set(size, (list = []));
    if (list.includes(ab)) return;
    list.push(ab);
    this.#retainedBytes += size;
  }
}

/** The pool a process's sockets and batcher share, so a buffer freed by one serves the other. */
export const sharedBufferPool = new BufferPool();
