import { TroupeError } from '../errors.js';
import type { ClassLabels } from '../spec.js';
import type { WireTensor, WireTensorMap } from '../tensor/wire.js';
import type { InferRequest } from './codec.js';
import { datatypeOfDtype } from './datatypes.js';

/**
 * Triton's classification extension: an output requested with `parameters: {classification: k}`
 * (tritonclient's `InferRequestedOutput(name, class_count=k)`) comes back as the k largest
 * values of each batch row, as BYTES strings "score:index" or "score:index:label", shape
 * [batch, min(k, classes)] (or [min(k, classes)] for an output of rank 1 or 0). As Triton's
 * server does (src/classification.cc, http_server.cc): the first dimension is the batch when the
 * output has two or more, a score is printed as C++ `std::to_string` prints it (printf "%f": six
 * decimals, exactly rounded, "-0.000000", "inf", "nan"), and a label is added where the
 * deployment has one for that index. Where Triton's unstable sort leaves ties in any order, equal
 * scores here go by lower index first, and NaN scores last.
 */

/** The classification asked of each requested output, by name; outputs without one are absent. */
export function classCounts(request: InferRequest): Map<string, number> {
  const counts = new Map<string, number>();
  for (const output of request.outputs ?? []) {
    const k = output.parameters?.classification;
    if (k === undefined) continue;
    if (typeof k !== 'number' || !Number.isSafeInteger(k) || k < 0) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `output '${output.name}': parameters.classification must be a whole number of classes >= 0, got ${JSON.stringify(k)}`,
      );
    }
    if (k > 0) counts.set(output.name, k);
  }
  return counts;
}

interface ScoreReader {
  /** Reads element i for comparison (bigint for 64-bit integers, so none loses precision). */
  value(i: number): number | bigint;
  /** Element i as std::to_string prints it. */
  text(i: number): string;
}

const TEN_TO_SIX = 1_000_000n;

/** printf("%f", x): six decimals from x's exact binary value, rounded half to even (glibc). */
export function printfFixed6(x: number, negativeSign = x < 0 || Object.is(x, -0)): string {
  if (Number.isNaN(x)) return negativeSign ? '-nan' : 'nan';
  if (!Number.isFinite(x)) return negativeSign ? '-inf' : 'inf';
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  // |x| = mantissa * 2^exponent exactly.
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const exponent = biased === 0 ? -1074 : biased - 1075;
  let scaled: bigint;
  if (exponent >= 0) scaled = (mantissa << BigInt(exponent)) * TEN_TO_SIX;
  else {
    const numerator = mantissa * TEN_TO_SIX;
    const denominator = 1n << BigInt(-exponent);
    scaled = numerator / denominator;
    const twice = 2n * (numerator % denominator);
    if (twice > denominator || (twice === denominator && (scaled & 1n) === 1n)) scaled += 1n;
  }
  const digits = scaled.toString().padStart(7, '0');
  return `${negativeSign ? '-' : ''}${digits.slice(0, -6)}.${digits.slice(-6)}`;
}

const CLASSIFIABLE = new Set(['uint8', 'int8', 'uint16', 'int16', 'uint32', 'int32', 'uint64', 'int64', 'float32', 'float64']);

function scoreReader(w: WireTensor, label: string): ScoreReader {
  if (!CLASSIFIABLE.has(w.dtype)) {
    // Triton's words for the same refusal (FP16, BF16, BOOL and BYTES have no classification).
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `${label}: class result not available for output due to unsupported type '${datatypeOfDtype(w.dtype)}'`,
    );
  }
  const bytes = w.data as Uint8Array;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const plain = (read: (i: number) => number): ScoreReader => ({ value: read, text: (i) => String(read(i)) });
  const wide = (read: (i: number) => bigint): ScoreReader => ({ value: read, text: (i) => read(i).toString() });
  switch (w.dtype) {
    case 'uint8':
      return plain((i) => view.getUint8(i));
    case 'int8':
      return plain((i) => view.getInt8(i));
    case 'uint16':
      return plain((i) => view.getUint16(i * 2, true));
    case 'int16':
      return plain((i) => view.getInt16(i * 2, true));
    case 'uint32':
      return plain((i) => view.getUint32(i * 4, true));
    case 'int32':
      return plain((i) => view.getInt32(i * 4, true));
    case 'uint64':
      return wide((i) => view.getBigUint64(i * 8, true));
    case 'int64':
      return wide((i) => view.getBigInt64(i * 8, true));
    case 'float32':
      // The sign of a NaN comes from its bits: "-nan" as glibc prints it.
      return {
        value: (i) => view.getFloat32(i * 4, true),
        text: (i) => printfFixed6(view.getFloat32(i * 4, true), (view.getUint8(i * 4 + 3) & 0x80) !== 0),
      };
    case 'float64':
      return {
        value: (i) => view.getFloat64(i * 8, true),
        text: (i) => printfFixed6(view.getFloat64(i * 8, true), (view.getUint8(i * 8 + 7) & 0x80) !== 0),
      };
    default:
      throw new TroupeError('TROUPE_ERR_INTERNAL', `${label}: no score reader for ${w.dtype}`);
  }
}

/** Larger first; equal values by lower index; NaN after every number. */
function byScore(reader: ScoreReader, base: number): (a: number, b: number) => number {
  return (a, b) => {
    const x = reader.value(base + a);
    const y = reader.value(base + b);
    const xNaN = typeof x === 'number' && Number.isNaN(x);
    const yNaN = typeof y === 'number' && Number.isNaN(y);
    if (xNaN || yNaN) return xNaN === yNaN ? a - b : xNaN ? 1 : -1;
    return x > y ? -1 : x < y ? 1 : a - b;
  };
}

/** One output's top-k per batch row, as Triton's BYTES classification tensor. */
export function classify(w: WireTensor, k: number, labels: readonly string[] | undefined, label: string): WireTensor {
  const reader = scoreReader(w, label);
  const batched = w.shape.length >= 2;
  const rows = batched ? w.shape[0]! : 1;
  const perRow = w.shape.slice(batched ? 1 : 0).reduce((a, b) => a * b, 1);
  const count = Math.min(k, perRow);
  const strings: string[] = [];
  const order = Array.from({ length: perRow }, (_, i) => i);
  for (let row = 0; row < rows; row++) {
    const base = row * perRow;
    const ranked = order.slice().sort(byScore(reader, base));
    for (let j = 0; j < count; j++) {
      const index = ranked[j]!;
      const name = labels?.[index];
      // Triton adds no label where there is none or it is empty.
      strings.push(`${reader.text(base + index)}:${index}${name ? `:${name}` : ''}`);
    }
  }
  return { dtype: 'string', shape: batched ? [rows, count] : [count], data: strings };
}

/** A deployment's labels of one output: one list for every output, or a list per output name (Triton's label_filename is per output). */
function labelsOf(labels: ClassLabels | undefined, output: string): readonly string[] | undefined {
  if (labels === undefined || Array.isArray(labels)) return labels;
  return Object.hasOwn(labels, output) ? (labels as Record<string, string[]>)[output] : undefined;
}

/** The outputs with each one that asked for classification replaced by its classes. */
export function classifyOutputs(
  outputs: WireTensorMap,
  counts: ReadonlyMap<string, number>,
  labels: ClassLabels | undefined,
): WireTensorMap {
  if (counts.size === 0) return outputs;
  const classified: WireTensorMap = { ...outputs };
  for (const [name, k] of counts) {
    const w = outputs[name];
    if (w) classified[name] = classify(w, k, labelsOf(labels, name), `output '${name}'`);
  }
  return classified;
}
