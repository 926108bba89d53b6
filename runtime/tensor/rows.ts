import { TroupeError } from '../errors.js';
import type { BufferPool } from '../transport/buffer-pool.js';
import { DTYPES } from './dtypes.js';
import type { NumericDType } from './dtypes.js';
import { bytesOf, elementCount, formatShape, viewBytes } from './tensor.js';
import type { Tensor, TypedArray } from './tensor.js';
import type { WireTensor, WireTensorMap } from './wire.js';

/**
 * Cutting tensors along the batch axis (axis 0) and joining them back: an actor's batcher joins
 * calls into one run and splits the outputs; a graph's dataParallel step cuts its input into
 * chunks and joins their outputs. Cuts are views of the caller's bytes, never copies; a join
 * copies once, or not at all when its parts already lie back to back in one buffer.
 */

/** The batch size every input shares; TROUPE_ERR_BAD_INPUT when they disagree or one has no batch axis. */
export function batchSize(inputs: WireTensorMap, where: string): number {
  let rows: number | undefined;
  let first = '';
  for (const [name, t] of Object.entries(inputs)) {
    if (t.shape.length === 0)
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${where}: input '${name}' is a scalar; there is no batch axis to cut`);
    if (rows === undefined) [rows, first] = [t.shape[0]!, name];
    else if (t.shape[0] !== rows) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_INPUT',
        `${where}: inputs disagree on the batch size: '${first}' has ${rows} rows, '${name}' has ${t.shape[0]}`,
      );
    }
  }
  if (rows === undefined) throw new TroupeError('TROUPE_ERR_BAD_INPUT', `${where}: no inputs to cut into chunks`);
  return rows;
}

/** The chunk boundaries of `rows` rows cut every `chunk` rows; the last chunk holds the rest. */
export function chunkBounds(rows: number, chunk: number): [number, number][] {
  const out: [number, number][] = [];
  for (let start = 0; start < rows; start += chunk) out.push([start, Math.min(rows, start + chunk)]);
  return out;
}

function rowBytes(t: WireTensor, label: string): number {
  const perRow = elementCount(t.shape.slice(1));
  const bytes = DTYPES[t.dtype].bytes * perRow;
  if (!Number.isInteger(bytes))
    throw new TroupeError(
      'TROUPE_ERR_BAD_INPUT',
      `${label}: ${formatShape(t.dtype, t.shape)} rows do not end on whole bytes, so it cannot be cut into chunks`,
    );
  return bytes;
}

/** Rows `[start, end)` of a wire tensor, sharing its bytes. */
export function sliceRows(t: WireTensor, start: number, end: number, label: string): WireTensor {
  const shape = [end - start, ...t.shape.slice(1)];
  if (t.dtype === 'string') {
    const per = elementCount(t.shape.slice(1));
    return { dtype: t.dtype, shape, data: (t.data as string[]).slice(start * per, end * per) };
  }
  const bytes = rowBytes(t, label);
  return { dtype: t.dtype, shape, data: (t.data as Uint8Array).subarray(start * bytes, end * bytes) };
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

/**
 * Joins wire tensors along axis 0, in order; they must agree on dtype and every other dim
 * (TROUPE_ERR_BAD_SPEC naming the part that does not). Parts that lie back to back in one buffer
 * (the single input of calls that came in one frame: large tensors travel 8-byte aligned after a
 * frame's body, so images do) are joined as one view of those bytes, with no copy: an image batch
 * is megabytes, and its copy was a fifth of a CNN actor's time between runs. Others are copied
 * once, into a buffer from `pool` (returned as `copy`, to be given back once nothing reads it) or
 * a fresh one; either starts aligned for any typed array.
 */
export function joinRows(parts: readonly WireTensor[], label: string, pool?: BufferPool): { tensor: WireTensor; copy?: Buffer } {
  const first = parts[0];
  if (!first) throw new TroupeError('TROUPE_ERR_INTERNAL', `${label}: nothing to join`);
  if (first.shape.length === 0)
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${label}: parts are scalars, which cannot be joined along the batch axis`);
  parts.forEach((p, i) => {
    const same =
      p.dtype === first.dtype && p.shape.length === first.shape.length && p.shape.every((d, k) => k === 0 || d === first.shape[k]);
    if (!same) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_SPEC',
        `${label}: chunk ${i} gave ${formatShape(p.dtype, p.shape)} but chunk 0 gave ${formatShape(first.dtype, first.shape)}; chunk outputs must agree to be concatenated`,
      );
    }
  });
  if (parts.length === 1) return { tensor: first };
  const rows = parts.reduce((sum, p) => sum + p.shape[0]!, 0);
  const shape = [rows, ...first.shape.slice(1)];
  if (first.dtype === 'string') return { tensor: { dtype: 'string', shape, data: parts.flatMap((p) => p.data as string[]) } };
  const arrays = parts.map((p) => p.data as Uint8Array);
  const total = arrays.reduce((sum, a) => sum + a.byteLength, 0);
  if (backToBack(arrays))
    return { tensor: { dtype: first.dtype, shape, data: new Uint8Array(arrays[0]!.buffer, arrays[0]!.byteOffset, total) } };
  const copy = pool?.take(total);
  // Every byte is written below, so a pooled buffer needs no zeroing.
  const out = copy ? new Uint8Array(copy.buffer, copy.byteOffset, total) : new Uint8Array(total);
  let at = 0;
  for (const a of arrays) {
    out.set(a, at);
    at += a.byteLength;
  }
  return copy ? { tensor: { dtype: first.dtype, shape, data: out }, copy } : { tensor: { dtype: first.dtype, shape, data: out } };
}

/** {@link joinRows} for a graph's chunk outputs: a fresh buffer the caller keeps. */
export function concatRows(parts: readonly WireTensor[], label: string): WireTensor {
  return joinRows(parts, label).tensor;
}

/** {@link joinRows} for tensors (an actor's batch of calls): typed arrays over the joined bytes. */
export function concatTensorRows(parts: readonly Tensor[], pool: BufferPool): { tensor: Tensor; copy?: Buffer } {
  const wire = parts.map((t): WireTensor =>
    t.dtype === 'string'
      ? { dtype: t.dtype, shape: [...t.shape], data: t.data as string[] }
      : { dtype: t.dtype, shape: [...t.shape], data: bytesOf(t.data as TypedArray) },
  );
  const { tensor, copy } = joinRows(wire, 'batch', pool);
  const data = tensor.dtype === 'string' ? (tensor.data as string[]) : viewBytes(tensor.dtype as NumericDType, tensor.data as Uint8Array);
  const joined: Tensor = { dtype: tensor.dtype, shape: tensor.shape, data };
  return copy ? { tensor: joined, copy } : { tensor: joined };
}

/** Whether the arrays lie in one buffer, each beginning right where the one before it ends. */
function backToBack(arrays: readonly Uint8Array[]): boolean {
  const first = arrays[0]!;
  let end = first.byteOffset + first.byteLength;
  for (let i = 1; i < arrays.length; i++) {
    const a = arrays[i]!;
    if (a.buffer !== first.buffer || a.byteOffset !== end) return false;
    end += a.byteLength;
  }
  return true;
}
