import * as z from 'zod';
import { TroupeError } from '../errors.js';
import { DTYPE_NAMES, byteLengthOf } from './dtypes.js';
import { printable } from './describe.js';
import { MAX_RANK, bytesOf, checkShape, elementCount, formatShape, viewBytes } from './tensor.js';
import type { Tensor, TypedArray } from './tensor.js';

/**
 * A tensor on the wire: raw little-endian bytes with dtype and shape, never a JSON number
 * array. Strings travel as a list. The schema checks form; {@link fromWire} checks that the
 * byte length agrees with the shape.
 */
export const WireTensorSchema = z.object({
  dtype: z.enum(DTYPE_NAMES),
  shape: z.array(z.number()).max(MAX_RANK),
  // One custom check instead of a union: this runs for every tensor of every call.
  data: z.custom<Uint8Array | string[]>(
    (v) => v instanceof Uint8Array || (Array.isArray(v) && v.every((s) => typeof s === 'string')),
    'expected bytes (or a list of strings for string tensors)',
  ),
});
export type WireTensor = z.infer<typeof WireTensorSchema>;

export const WireTensorMapSchema = z.record(z.string().min(1).max(256), WireTensorSchema);
export type WireTensorMap = z.infer<typeof WireTensorMapSchema>;

/** Zero-copy: the wire form shares the typed array's memory. */
export function toWire(t: Tensor): WireTensor {
  if (t.dtype === 'string') return { dtype: t.dtype, shape: [...t.shape], data: t.data as string[] };
  return { dtype: t.dtype, shape: [...t.shape], data: bytesOf(t.data as TypedArray) };
}

/**
 * Checks a wire tensor's data against its shape. Throws TROUPE_ERR_BAD_TENSOR, e.g.
 * "input 'x': float32[1,64] needs 256 bytes, got 252".
 */
export function checkWire(w: WireTensor, label: string): void {
  checkShape(w.shape, label);
  const count = elementCount(w.shape);
  if (w.dtype === 'string') {
    if (!Array.isArray(w.data) || w.data.length !== count) {
      const got = Array.isArray(w.data) ? `${w.data.length} strings` : 'bytes';
      throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: ${formatShape(w.dtype, w.shape)} needs ${count} strings, got ${got}`);
    }
    return;
  }
  if (!(w.data instanceof Uint8Array)) {
    throw new TroupeError('TROUPE_ERR_BAD_TENSOR', `${label}: ${w.dtype} data must be bytes, got a list`);
  }
  const need = byteLengthOf(w.dtype, count);
  if (w.data.byteLength !== need) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_TENSOR',
      `${label}: ${formatShape(w.dtype, w.shape)} needs ${need} bytes, got ${w.data.byteLength}`,
    );
  }
}

/** Checks a wire tensor ({@link checkWire}) and views its bytes as a typed array. */
export function fromWire(w: WireTensor, label: string): Tensor {
  return printable(viewOfWire(w, label));
}

/** {@link fromWire} for a tensor only the runtime reads: without printable()'s properties, which only user code's logs look at. */
export function viewOfWire(w: WireTensor, label: string): Tensor {
  checkWire(w, label);
  if (w.dtype === 'string') return { dtype: w.dtype, shape: w.shape, data: w.data as string[] };
  return { dtype: w.dtype, shape: w.shape, data: viewBytes(w.dtype, w.data as Uint8Array) };
}

export function mapToWire(tensors: Record<string, Tensor>): WireTensorMap {
  const out: WireTensorMap = {};
  for (const [name, t] of Object.entries(tensors)) out[name] = toWire(t);
  return out;
}

export function mapFromWire(wire: WireTensorMap, role: 'input' | 'output'): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [name, w] of Object.entries(wire)) out[name] = fromWire(w, `${role} '${name}'`);
  return out;
}

/** {@link mapFromWire} for inputs only the runtime reads (a model actor's batcher and session): see {@link viewOfWire}. */
export function inputViewsFromWire(wire: WireTensorMap): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [name, w] of Object.entries(wire)) out[name] = viewOfWire(w, `input '${name}'`);
  return out;
}
