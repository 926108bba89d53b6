import { Worker } from 'node:worker_threads';
import { fromWireError, TroupeError } from '../../runtime/internal.js';
import type { DecodedRequest, InferRequest, WireError } from '../../runtime/internal.js';

export interface JobBodyAsk {
  id: number;
  bytes: Uint8Array;
  headerLength: string | string[] | undefined;
}

export type JobBodyAnswer = { id: number; body: InferRequest; decoded: DecodedRequest } | { id: number; error: WireError };

/**
 * Parses job bodies (OIP inference requests, JSON and binary) on a thread of their own, one at a
 * time in arrival order: the jobs route is always the head's, and 14 bodies of 63 MB parsed on its
 * event loop held /healthz for 3.7 s. The thread starts with the first job, ends when idle, and
 * lets the process exit without it.
 */
/** A thread idle this long ends, giving back the heap its last parses grew (hundreds of MB for large bodies). */
const IDLE_MS = 5000;

export class JobBodyParser {
  #thread: Worker | undefined;
  #idle: NodeJS.Timeout | undefined;
  #next = 0;
  readonly #waiting = new Map<
    number,
    { resolve: (answer: { body: InferRequest; decoded: DecodedRequest }) => void; reject: (err: Error) => void }
  >();

  parse(bytes: Buffer, headerLength: string | string[] | undefined): Promise<{ body: InferRequest; decoded: DecodedRequest }> {
    clearTimeout(this.#idle);
    const thread = this.#started();
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      // A body that is a whole buffer of its own moves to the thread; a slice of a larger one is copied.
      const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.byteLength >= 1 << 16;
      thread.postMessage({ id, bytes, headerLength } satisfies JobBodyAsk, own ? [bytes.buffer as ArrayBuffer] : []);
    });
  }

  #started(): Worker {
    if (this.#thread) return this.#thread;
    const thread = new Worker(new URL('./job-body-thread.js', import.meta.url));
    thread.unref();
    thread.on('message', (answer: JobBodyAnswer) => {
      const waiting = this.#waiting.get(answer.id);
      if (!waiting) return;
      this.#waiting.delete(answer.id);
      if ('error' in answer) waiting.reject(fromWireError(answer.error));
      else waiting.resolve(answer);
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
      for (const waiting of this.#waiting.values()) waiting.reject(new TroupeError('TROUPE_ERR_INTERNAL', `the job body parser ${why}`));
      this.#waiting.clear();
    };
    thread.on('error', (err) => lost(`failed: ${err.message}`));
    thread.on('exit', (code) => lost(`exited (${code})`));
    this.#thread = thread;
    return thread;
  }
}
