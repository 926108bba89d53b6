/**
 * Large buffers handed back and reused instead of left to the garbage collector.
 *
 * An actor receiving images allocates megabytes a second; V8 counts each such ArrayBuffer as
 * external memory and answers with a full mark-compact every few megabytes. Over a socket
 * carrying images, fresh buffers cost the receiver several times the CPU of reused ones
 * (bench/RESULTS-hops.md), most of it on V8's collector threads, which on a busy machine run on
 * the cores the models need.
 *
 * Buffers come in power-of-two size classes from {@link MIN_POOLED_BYTES} up; smaller requests are
 * plain allocations (Node's own slab serves them cheaply). A buffer taken and never given back is
 * simply collected: giving back is an optimisation, never an obligation. A size class nobody took
 * from for a while is let go, so a burst of images does not hold a process's memory up for good
 * (the head kept 78 MiB after one MobileNet benchmark before this).
 */
export const MIN_POOLED_BYTES = 16 * 1024;
/** Above this a request is a plain allocation: a buffer this large is rare, and costly to keep. */
export const MAX_POOLED_BYTES = 256 * 1024 * 1024;

const classOf = (bytes: number) => 2 ** Math.ceil(Math.log2(Math.max(bytes, MIN_POOLED_BYTES)));

/** The free buffers of one size class, and whether one was taken since the last sweep. */
interface SizeClass {
  buffers: ArrayBuffer[];
  taken: boolean;
}

export class BufferPool {
  readonly #free = new Map<number, SizeClass>();
  /**
   * The ArrayBuffers this pool allocated: only those are ever kept. Checking size alone took Node's
   * own slab on Node 24, whose Buffer.poolSize (64 KiB) is one of these classes: a small buffer given
   * back put the slab in the pool, to be handed out while Node still carved other buffers from it.
   */
  readonly #ours = new WeakSet<ArrayBuffer>();
  readonly #maxRetainedBytes: number;
  readonly #idleMs: number;
  #retainedBytes = 0;
  #sweeper: NodeJS.Timeout | undefined;

  /**
   * `maxRetainedBytes`: at most this much is kept for reuse; buffers given back past it are
   * dropped. `idleMs`: a size class none was taken from for between one and two of these is let go.
   */
  constructor(maxRetainedBytes = 128 * 1024 * 1024, idleMs = 10_000) {
    this.#maxRetainedBytes = maxRetainedBytes;
    this.#idleMs = idleMs;
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
    const free = this.#free.get(size);
    const reused = free?.buffers.pop();
    if (reused) {
      free!.taken = true;
      this.#retainedBytes -= size;
      return Buffer.from(reused, 0, bytes);
    }
    // Its own ArrayBuffer of the class's size, left unzeroed: every byte is written before use.
    const fresh = Buffer.allocUnsafeSlow(size);
    this.#ours.add(fresh.buffer as ArrayBuffer);
    return fresh.subarray(0, bytes);
  }

  /**
   * Hands a buffer from {@link take} back. The caller promises nothing reads or writes it any
   * more; giving back the same buffer twice is ignored rather than handing it out twice.
   */
  give(buffer: Uint8Array): void {
    const ab = buffer.buffer;
    const size = ab.byteLength;
    if (!(ab instanceof ArrayBuffer) || !this.#ours.has(ab) || size < MIN_POOLED_BYTES || size !== classOf(size) || size > MAX_POOLED_BYTES)
      return;
    if (this.#retainedBytes + size > this.#maxRetainedBytes) return;
    let free = this.#free.get(size);
    // A class starts out as taken from: the buffer given back was just taken to be used.
    if (!free) this.#free.set(size, (free = { buffers: [], taken: true }));
    if (free.buffers.includes(ab)) return;
    free.buffers.push(ab);
    this.#retainedBytes += size;
    // A timer only while something is kept, and one that never holds a process open.
    this.#sweeper ??= setInterval(() => this.#sweep(), this.#idleMs).unref();
  }

  /** Lets go of the classes none was taken from since the last sweep. */
  #sweep(): void {
    for (const [size, free] of this.#free) {
      if (free.taken) {
        free.taken = false;
        continue;
      }
      this.#retainedBytes -= size * free.buffers.length;
      this.#free.delete(size);
    }
    if (this.#free.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }
}

/** The pool a process's sockets and batcher share, so a buffer freed by one serves the other. */
export const sharedBufferPool = new BufferPool();
