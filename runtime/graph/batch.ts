import { TroupeError } from '../errors.js';
import { DTYPES } from '../tensor/dtypes.js';
import { elementCount, formatShape } from '../tensor/tensor.js';
import type { WireTensor, WireTensorMap } from '../tensor/wire.js';

/**
 * Cutting tensors along the batch axis (axis 0) and gluing them back, on wire tensors: a chunk
 * is a view of the caller's bytes (no copy), and only the final concatenation allocates.
 */

/** The batch size every input shares; TROUPE_ERR_BAD_INPUT when they disagree or one has no batch axis. */
export function batchSize(inputs: WireTensorMap, where: string): number {
  let rows: number | undefined;
  let first = '';
  for (const [name, t] of Object.entries(inputs)) {
    if (t.shape.length === 0) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${where}: input '${name}' is a scalar; there is no batch axis to cut`);
    if (rows === undefined) [rows, first] = [t.shape[0]!, name];
    else if (t.shape[0] !== rows) {
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${where}: inputs disagree on the batch size: '${first}' has ${rows} rows, '${name}' has ${t.shape[0]}`);
    }
  }
  if (rows === undefined) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${where}: no inputs to cut into chunks`);
  return rows;
}

function rowBytes(t: WireTensor, label: string): number {
  const perRow = elementCount(t.shape.slice(1));
  const bytes = DTYPES[t.dtype].bytes * perRow;
  if (!Number.isInteger(bytes)) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${label}: ${formatShape(t.dtype, t.shape)} rows do not end on whole bytes, so it cannot be cut into chunks`);
  return bytes;
}

/** Rows `[start, end)` of a tensor, sharing its bytes. */
export function sliceRows(t: WireTensor, start: number, end: number, label: string): WireTensor {
  const shape = [end - start, ...t.shape.slice(1)];
  if (t.dtype === 'string') {
    const per = elementCount(t.shape.slice(1));
    return { dtype: t.dtype, shape, data: (t.data as string[]).slice(start * per, end * per) };
  }
  const bytes = rowBytes(t, label);
  return { dtype: t.dtype, shape, data: (t.data as Uint8Array).subarray(start * bytes, end * bytes) };
}

/** The chunk boundaries of `rows` rows cut every `chunk` rows; the last chunk holds the rest. */
export function chunkBounds(rows: number, chunk: number): [number, number][] {
  const out: [number, number][] = [];
  for (let start = 0; start < rows; start += chunk) out.push([start, Math.min(rows, start + chunk)]);
  return out;
}

/** Concatenates tensors along axis 0, in order; they must agree on dtype and every other dim. */
export function concatRows(parts: readonly WireTensor[], label: string): WireTensor {
  const first = parts[0];
  if (!first) throw new TroupeError('TROUPE_ERR_INTERNAL', `${label}: nothing to concatenate`);
  if (first.shape.length === 0) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${label}: chunks gave scalars, which cannot be concatenated along the batch axis`);
  parts.forEach((p, i) => {
    const same = p.dtype === first.dtype && p.shape.length === first.shape.length && p.shape.every((d, k) => k === 0 || d === first.shape[k]);
    if (!same) {
      throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${label}: chunk ${i} gave ${formatShape(p.dtype, p.shape)} but chunk 0 gave ${formatShape(first.dtype, first.shape)}; chunk outputs must agree to be concatenated`);
    }
  });
  const rows = parts.reduce((sum, p) => sum + p.shape[0]!, 0);
  const shape = [rows, ...first.shape.slice(1)];
  if (first.dtype === 'string') return { dtype: 'string', shape, data: parts.flatMap((p) => p.data as string[]) };
  const total = parts.reduce((sum, p) => sum + (p.data as Uint8Array).byteLength, 0);
  // A fresh buffer starts at offset 0, so typed-array views of the result are aligned.
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p.data as Uint8Array, at);
    at += (p.data as Uint8Array).byteLength;
  }
  return { dtype: first.dtype, shape, data: out };
}
