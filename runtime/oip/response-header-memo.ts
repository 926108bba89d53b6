import type { WireTensorMap } from '../tensor/wire.js';
import type { DType } from '../tensor/dtypes.js';
import type { InferRequest } from './codec.js';

/**
 * The JSON part of a binary inference response, kept for a request object that comes again (a
 * memo's, request-memo.ts). It is written from the model name, the request (its id and which
 * outputs go as binary) and each output's name, datatype, shape and byte size, so while those stay
 * the same its bytes do too, and only the binary part is new with each call.
 */

interface KeptOutput {
  dtype: DType;
  shape: readonly number[];
  bytes: number;
}

interface KeptHeader {
  model: string;
  version: string;
  order: readonly string[];
  outputs: readonly KeptOutput[];
  header: Buffer;
}

/** One header per request object, dropped with it: the memo of requests bounds how many are kept. */
const kept = new WeakMap<InferRequest, KeptHeader>();

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The header kept for `request` when it describes these outputs exactly, else undefined. */
export function keptResponseHeader(
  request: InferRequest,
  model: string,
  version: string,
  outputs: WireTensorMap,
  order: readonly string[],
): Buffer | undefined {
  const k = kept.get(request);
  if (!k || k.model !== model || k.version !== version || k.order.length !== order.length) return undefined;
  for (let i = 0; i < order.length; i++) {
    const name = order[i]!;
    const w = outputs[name];
    const o = k.outputs[i]!;
    if (k.order[i] !== name || !w || w.dtype !== o.dtype || w.data.length !== o.bytes || !sameShape(w.shape, o.shape)) return undefined;
  }
  return k.header;
}

/**
 * Keeps `header` for `request` when it can come again (a frozen, shared request) and every output
 * in `order` went as binary data of fixed size (BYTES outputs' sizes follow their strings).
 */
export function keepResponseHeader(
  request: InferRequest,
  model: string,
  version: string,
  outputs: WireTensorMap,
  order: readonly string[],
  binary: (name: string) => boolean,
  header: Buffer,
): void {
  if (!Object.isFrozen(request)) return;
  const described: KeptOutput[] = [];
  for (const name of order) {
    const w = outputs[name];
    if (!w || w.dtype === 'string' || !binary(name)) return;
    described.push({ dtype: w.dtype, shape: [...w.shape], bytes: w.data.length });
  }
  kept.set(request, { model, version, order: [...order], outputs: described, header });
}
