/**
 * Values kept by key in a binary heap under a total order, each reachable by its key so that one
 * can be changed or removed in O(log n). The scheduler keeps each node's verdict for the request
 * being placed here: the best node is the top, and placing an actor changes one node's verdict,
 * so the next placement re-ranks that node alone instead of comparing all of them
 * (bench/scale/HISTORY.md: at 3,000 nodes a comparison of every node per placement made the deploy
 * stall for seconds).
 */
export class RankedNodes<T> {
  readonly #order: (a: T, b: T) => number;
  readonly #heap: { key: string; value: T }[] = [];
  readonly #at = new Map<string, number>();

  /** @param order must be total (no two values equal), so the top is the one a full scan would choose. */
  constructor(order: (a: T, b: T) => number) {
    this.#order = order;
  }

  get size(): number {
    return this.#heap.length;
  }

  /** The first value in the order, or undefined when none is kept. */
  top(): T | undefined {
    return this.#heap[0]?.value;
  }

  /** Keeps `value` under `key` (replacing what was there); null removes the key. */
  set(key: string, value: T | null): void {
    const i = this.#at.get(key);
    if (i === undefined) {
      if (value === null) return;
      this.#heap.push({ key, value });
      this.#at.set(key, this.#heap.length - 1);
      this.#up(this.#heap.length - 1);
      return;
    }
    if (value !== null) {
      this.#heap[i]!.value = value;
      this.#down(this.#up(i));
      return;
    }
    // Removal: the last entry takes the hole and moves whichever way it must.
    const last = this.#heap.pop()!;
    this.#at.delete(key);
    if (i === this.#heap.length) return;
    this.#heap[i] = last;
    this.#at.set(last.key, i);
    this.#down(this.#up(i));
  }

  #less(i: number, j: number): boolean {
    return this.#order(this.#heap[i]!.value, this.#heap[j]!.value) < 0;
  }

  #swap(i: number, j: number): void {
    const a = this.#heap[i]!;
    const b = this.#heap[j]!;
    this.#heap[i] = b;
    this.#heap[j] = a;
    this.#at.set(b.key, i);
    this.#at.set(a.key, j);
  }

  /** Moves entry `i` toward the top while it precedes its parent; returns where it ended. */
  #up(i: number): number {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
    return i;
  }

  #down(i: number): void {
    const n = this.#heap.length;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let first = i;
      if (left < n && this.#less(left, first)) first = left;
      if (right < n && this.#less(right, first)) first = right;
      if (first === i) return;
      this.#swap(i, first);
      i = first;
    }
  }
}
