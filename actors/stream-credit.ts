import { MAX_STREAM_CREDIT } from '../runtime/internal.js';

/**
 * The credit of one streaming call inside a class actor: how many more items its reader has asked
 * for. The generator is pulled only while there is credit, so a slow reader holds it at its
 * `yield` (a bounded buffer: at most the reader's window is in flight), and a cancelled one stops it.
 */
export class StreamCredit {
  #credit: number;
  #cancelled = false;
  #wake: (() => void) | undefined;

  constructor(initial: number) {
    this.#credit = initial;
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  grant(n: number): void {
    this.#credit = Math.min(MAX_STREAM_CREDIT, this.#credit + n);
    this.#wake?.();
  }

  cancel(): void {
    this.#cancelled = true;
    this.#wake?.();
  }

  /** Takes one credit, waiting for a grant if there is none; false once the stream is cancelled. */
  async take(): Promise<boolean> {
    while (this.#credit === 0 && !this.#cancelled) await new Promise<void>((resolve) => (this.#wake = resolve));
    this.#wake = undefined;
    if (this.#cancelled) return false;
    this.#credit--;
    return true;
  }
}
