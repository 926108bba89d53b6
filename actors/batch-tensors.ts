import { DTYPES, elementCount } from '../runtime/index.js';
import type { BufferPool, NumericDType, Tensor, TypedArray } from '../runtime/index.js';

/**
 * A key that two calls share exactly when they may run in one batch: the same input names, dtypes
 * and non-batch dims, and the same output selection. Calls whose non-batch dims differ are never
 * mixed.
 */
export function batchKey(inputs: Record<string, Tensor>, outputs: readonly string[] | undefined): string {
  const parts = Object.keys(inputs)
    .sort()
    .map((name) => {
      const t = inputs[name]!;
      return `${name}:${t.dtype}[${t.shape.slice(1).join(',')}]`;
    });
  return `${parts.join(';')}|${outputs ? [...outputs].sort().join(',') : '*'}`;
}

/**
 * Rows a call contributes: its batch dim (all inputs agree on it), or null when it cannot be
 * batched. 4-bit tensors pack two elements a byte, so a call's rows need not end on a byte and
 * joining them byte by byte would shift every value after an odd one: those calls run alone.
 */
export function rowsOf(inputs: Record<string, Tensor>): number | null {
  let rows: number | null = null;
  for (const t of Object.values(inputs)) {
    const first = t.shape[0];
    if (first === undefined || t.dtype === 'int4' || t.dtype === 'uint4') return null;
    if (rows === null) rows = first;
    else if (rows !== first) return null;
  }
  return rows;
}

/**
 * Concatenates same-shaped tensors along axis 0 (never 4-bit ones: see {@link rowsOf}). Large
 * tensors (16 KB and up) travel after a frame's body, each at a multiple of 8 bytes, so the
 * single input of calls that came in one frame lies back to back in its buffer when its size is a
 * multiple of 8 (an image is): a batch of them is one view over those bytes and costs no copy; an
 * image batch is megabytes, and the copy with its allocation was a fifth of a CNN actor's time
 * between runs. Other batches are copied once into a buffer from `pool`, left unzeroed as every
 * byte of it is written, and returned as `copy` to be given back once the run is over.
 */
export function concatRows(parts: readonly Tensor[], pool: BufferPool): { tensor: Tensor; copy?: Buffer } {
  const first = parts[0]!;
  if (parts.length === 1) return { tensor: first };
  const rows = parts.reduce((n, t) => n + t.shape[0]!, 0);
  const shape = [rows, ...first.shape.slice(1)];
  if (first.dtype === 'string') return { tensor: { dtype: 'string', shape, data: parts.flatMap((t) => t.data as string[]) } };
  const Ctor = DTYPES[first.dtype as NumericDType].array;
  const count = elementCount(shape);
  const adjacent = backToBack(parts.map((t) => t.data as TypedArray));
  if (adjacent) return { tensor: { dtype: first.dtype, shape, data: new Ctor(adjacent.buffer as ArrayBuffer, adjacent.byteOffset, count) as TypedArray } };
  const bytes = pool.take(count * Ctor.BYTES_PER_ELEMENT);
  const out = new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, count) as TypedArray;
  let offset = 0;
  for (const t of parts) {
    (out as Float32Array).set(t.data as Float32Array, offset);
    offset += (t.data as TypedArray).length;
  }
  return { tensor: { dtype: first.dtype, shape, data: out }, copy: bytes };
}

/** Where the arrays start when each begins right where the one before it ends, in one buffer. */
function backToBack(arrays: readonly TypedArray[]): { buffer: ArrayBufferLike; byteOffset: number } | undefined {
  const first = arrays[0]!;
  let end = first.byteOffset + first.byteLength;
  for (let i = 1; i < arrays.length; i++) {
    const a = arrays[i]!;
    if (a.buffer !== first.buffer || a.byteOffset !== end) return undefined;
    end += a.byteLength;
  }
  return first;
}

/** Splits a tensor along axis 0 into pieces of `rows[i]` rows, as views (no copy). */
export function splitRows(t: Tensor, rows: readonly number[]): Tensor[] {
  const total = t.shape[0] ?? 0;
  const perRow = total === 0 ? 0 : elementCount(t.shape) / total;
  const out: Tensor[] = [];
  let start = 0;
  for (const n of rows) {
    const begin = start * perRow;
    const end = (start + n) * perRow;
    const data = Array.isArray(t.data) ? t.data.slice(begin, end) : (t.data as TypedArray).subarray(begin, end);
    out.push({ dtype: t.dtype, shape: [n, ...t.shape.slice(1)], data: data as Tensor['data'] });
    start += n;
  }
  return out;
}
