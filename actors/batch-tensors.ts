import type { Tensor } from '../runtime/internal.js';

// Which calls may share a run. Joining and splitting their rows is runtime/tensor/rows.ts.

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
