import { TroupeError } from '../errors.js';
import type { StreamItem } from '../protocol/class-actor.js';

/** How many items a reader lets a stream run ahead by default. */
export const DEFAULT_STREAM_WINDOW = 16;

/** What an {@link ActorStream} asks of its connection: more credit, or to stop. */
export interface StreamControls {
  grant(n: number): void;
  cancel(): void;
}

/**
 * The items of a streaming call (an async generator method), read with `for await`. The reader
 * holds the producer back: the instance may run at most `window` items ahead of what was read,
 * and gets more room as items are taken (half a window at a time). Leaving the loop early
 * (`break`, `return`, a throw) cancels the stream, which ends the generator (its `finally` runs).
 * If the stream fails midway, the loop throws a TroupeError that says after which item.
 *
 * @example
 * for await (const token of tok.stream('generate', 'Once upon a time', { maxTokens: 32 })) process.stdout.write(token);
 */
export class ActorStream<T = unknown> implements AsyncIterableIterator<T> {
  readonly id: string;
  readonly #window: number;
  readonly #controls: StreamControls;
  readonly #decode: ((value: unknown) => T) | undefined;
  #queue: T[] = [];
  #received = 0;
  #taken = 0;
  #ended = false;
  #stopped = false;
  #error: unknown;
  #wake: (() => void) | undefined;

  /** @internal use `handle.stream(method, ...args)` or `cluster.stream(graph, inputs)`; `decode` turns each item as it came into what the reader gets */
  constructor(id: string, window: number, controls: StreamControls, decode?: (value: unknown) => T) {
    this.id = id;
    this.#window = window;
    this.#controls = controls;
    this.#decode = decode;
  }

  /** @internal The next item, as it arrived. */
  push(seq: number, value: T): void {
    if (this.#stopped || this.#error !== undefined) return;
    if (seq !== this.#received) {
      this.fail(new TroupeError('TROUPE_ERR_BAD_MESSAGE', `stream ${this.id}: item ${seq} arrived where item ${this.#received} was due`));
      return;
    }
    this.#received++;
    if (this.#decode) {
      try {
        value = this.#decode(value);
      } catch (err) {
        this.fail(err);
        this.#controls.cancel();
        return;
      }
    }
    this.#queue.push(value);
    this.#wake?.();
  }

  /** @internal The last item has arrived. */
  end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  /** @internal The stream failed. */
  fail(error: unknown): void {
    if (this.#ended || this.#stopped) return;
    this.#error = error;
    this.#wake?.();
  }

  /** @internal The reader's own signal aborted: items still queued are not handed out, the next read throws `error`. */
  abort(error: unknown): void {
    if (this.#ended || this.#stopped) return;
    this.#queue = [];
    this.fail(error);
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      if (this.#queue.length > 0) {
        const value = this.#queue.shift()!;
        // Room for more, half a window at a time: fewer grants than one per item, and never a stall.
        if (++this.#taken >= Math.max(1, Math.floor(this.#window / 2))) {
          this.#controls.grant(this.#taken);
          this.#taken = 0;
        }
        return { value, done: false };
      }
      if (this.#error !== undefined) {
        const error = this.#error;
        this.#stopped = true;
        this.#error = undefined;
        throw error;
      }
      if (this.#ended || this.#stopped) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  /** Stops reading: the stream is cancelled (at once if it is still running). */
  async return(): Promise<IteratorResult<T>> {
    if (!this.#ended && !this.#stopped) this.#controls.cancel();
    this.#stopped = true;
    this.#queue = [];
    this.#wake?.();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}

/** The streams open on one connection, by call id: where the head's `streamItem` pushes go. */
export class StreamRegistry {
  readonly #open = new Map<string, ActorStream<unknown>>();

  add(stream: ActorStream<unknown>, done: Promise<unknown>): void {
    this.#open.set(stream.id, stream);
    done.then(
      () => stream.end(),
      (err: unknown) => stream.fail(err),
    );
    void done.finally(() => this.#open.delete(stream.id)).catch(() => {});
  }

  deliver(item: StreamItem): void {
    this.#open.get(item.stream)?.push(item.seq, item.value);
  }
}
