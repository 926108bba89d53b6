import { Worker } from 'node:worker_threads';
import { fromWireError, TroupeError } from '../../runtime/internal.js';
import type { CallBody } from './call-body.js';
import type { DecodedRequest, GenerateRequest, InferRequest, TensorInfo, WireError, WireTensorMap } from '../../runtime/internal.js';

/** What a body is parsed as, what the thread is given with it, and what comes back. */
export interface BodyKinds {
  /** An OIP inference request (JSON, or JSON and binary) submitted as a job. */
  job: {
    ask: { headerLength: string | string[] | undefined };
    answer: { body: InferRequest; decoded: DecodedRequest };
  };
  /**
   * A generate request. With `inputs` (a model's or graph's declared inputs) its JSON values come
   * back converted to tensors, and the body without them; without, the body (a class actor's values).
   */
  generate: {
    ask: { target: string; inputs?: readonly TensorInfo[] };
    answer: { body: GenerateRequest; tensors?: WireTensorMap };
  };
  /** A class actor's method call (its arguments bounded as the call bounds them). */
  call: {
    ask: { actor: string; method: string };
    answer: CallBody;
  };
}
export type BodyKind = keyof BodyKinds;

export type BodyAsk = { [K in BodyKind]: { id: number; kind: K; bytes: Uint8Array } & BodyKinds[K]['ask'] }[BodyKind];
export type BodyAnswer = { id: number; answer: BodyKinds[BodyKind]['answer'] } | { id: number; error: WireError };

/**
 * Bodies up to this size are parsed on the event loop: the hop to the thread and back costs about
 * as much as their parse (0.3 ms for 4 KiB, 0.7 ms for 64 KiB, against 0.02 and 0.4 ms to parse).
 */
export const INLINE_BODY_BYTES = 64 * 1024;

/** The body thread's nice value, on Linux its own (body-thread-main.ts): under the event loop it works for. */
export const BODY_THREAD_NICE = 10;

/** A thread idle this long ends, giving back the heap its last parses grew (hundreds of MB for large bodies). */
const IDLE_MS = 5000;

/**
 * Parses request bodies (jobs, generate requests, method calls) on a thread of their own, one at a time in
 * arrival order: 14 job bodies of 63 MB parsed on the head's event loop held /healthz for 3.7 s.
 * What comes back is cheap to receive: tensors' bytes are moved, not copied, and the JSON they
 * came from stays on the thread. The thread starts with the first body, ends when idle, and lets
 * the process exit without it.
 */
export class BodyThread {
  #thread: Worker | undefined;
  #idle: NodeJS.Timeout | undefined;
  #next = 0;
  readonly #waiting = new Map<number, { resolve: (answer: unknown) => void; reject: (err: Error) => void }>();

  parse<K extends BodyKind>(kind: K, bytes: Buffer, ask: BodyKinds[K]['ask']): Promise<BodyKinds[K]['answer']> {
    clearTimeout(this.#idle);
    const thread = this.#started();
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve: resolve as (answer: unknown) => void, reject });
      // A body that is a whole buffer of its own moves to the thread; a slice of a larger one is copied.
      const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.byteLength >= 1 << 16;
      thread.postMessage({ id, kind, bytes, ...ask } as BodyAsk, own ? [bytes.buffer as ArrayBuffer] : []);
    });
  }

  #started(): Worker {
    if (this.#thread) return this.#thread;
    const thread = new Worker(new URL('./body-thread-main.js', import.meta.url));
    thread.unref();
    thread.on('message', (message: BodyAnswer) => {
      const waiting = this.#waiting.get(message.id);
      if (!waiting) return;
      this.#waiting.delete(message.id);
      if ('error' in message) waiting.reject(fromWireError(message.error));
      else waiting.resolve(message.answer);
      if (this.#waiting.size === 0) {
        this.#idle = setTimeout(() => {
          if (this.#thread !== thread || this.#waiting.size > 0) return;
          this.#thread = undefined;
          void thread.terminate();
        }, IDLE_MS);
        this.#idle.unref();
      }
    });
    // A thread that died (out of memory on a body) fails what it held; the next body starts another.
    const lost = (why: string) => {
      if (this.#thread !== thread) return;
      this.#thread = undefined;
      for (const waiting of this.#waiting.values()) waiting.reject(new TroupeError('TROUPE_ERR_INTERNAL', `the body parser thread ${why}`));
      this.#waiting.clear();
    };
    thread.on('error', (err) => lost(`failed: ${err.message}`));
    thread.on('exit', (code) => lost(`exited (${code})`));
    this.#thread = thread;
    return thread;
  }
}
