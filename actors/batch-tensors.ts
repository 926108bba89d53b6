import { DTYPES, elementCount } from '../runtime/index.js';
import type { NumericDType, Tensor, TypedArray } from '../runtime/index.js';

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

/** Rows a call contributes: its batch dim (all inputs agree on it, or it is not batchable). */
export function rowsOf(inputs: Record<string, Tensor>): number | null {
  let rows: number | null = null;
  for (const t of Object.values(inputs)) {
    const first = t.shape[0];
    if (first === undefined) return null;
    if (rows === null) rows = first;
    else if (rows !== first) return null;
  }
  return rows;
}

/** Concatenates same-shaped tensors along axis 0 with one allocation and one copy each. */
export function concatRows(parts: readonly Tensor[]): Tensor {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const rows = parts.reduce((n, t) => n + t.shape[0]!, 0);
  const shape = [rows, ...first.shape.slice(1)];
  if (first.dtype === 'string') return { dtype: 'string', shape, data: parts.flatMap((t) => t.data as string[]) };
  const Ctor = DTYPES[first.dtype as NumericDType].array;
  const out = new Ctor(elementCount(shape)) as TypedArray;
  let offset = 0;
  for (const t of parts) {
    (out as Float32Array).set(t.data as Float32Array, offset);
    offset += (t.data as TypedArray).length;
  }
  return { dtype: first.dtype, shape, data: out };
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
