import { TroupeError } from '../errors.js';
import { DTYPES } from '../tensor/dtypes.js';
import type { DType, NumericDType } from '../tensor/dtypes.js';
import { elementCount, formatShape } from '../tensor/tensor.js';
import type { Tensor, TypedArray } from '../tensor/tensor.js';

/**
 * The built-in ensemble combiners. Pure functions of tensors (no I/O, inputs never mutated), run
 * by the head on the members' outputs: a combine of a few small tensors costs far less than a
 * trip to an actor would.
 */

export type BuiltinCombine =
  { op: 'mean'; weights?: number[] | undefined } | { op: 'max' } | { op: 'vote' } | { op: 'concat'; axis: number };

/** One combined output: its name and, per member, the output that feeds it. */
export interface CombineGroup {
  name: string;
  sources: string[];
}

function fail(message: string): never {
  throw new TroupeError('TROUPE_ERR_BAD_SPEC', message);
}

/**
 * Which member outputs combine with which: when every member has exactly one output, those
 * (named after the first member's); otherwise outputs of the same name, which every member must
 * then have. Returns the groups, or a reason they cannot be formed.
 */
export function groupOutputs(members: readonly { name: string; outputs: readonly string[] }[]): CombineGroup[] | string {
  if (members.every((m) => m.outputs.length === 1)) return [{ name: members[0]!.outputs[0]!, sources: members.map((m) => m.outputs[0]!) }];
  const first = members[0]!;
  const key = (names: readonly string[]) => [...names].sort().join(', ');
  for (const m of members.slice(1)) {
    if (key(m.outputs) !== key(first.outputs)) {
      return `member '${m.name}' gives ${key(m.outputs) || 'nothing'} but member '${first.name}' gives ${key(first.outputs) || 'nothing'}; built-in combiners need one output from each member or the same outputs from all`;
    }
  }
  return first.outputs.map((name) => ({ name, sources: members.map(() => name) }));
}

const FLOATS: ReadonlySet<DType> = new Set(['float32', 'float64']);

/** Checks that tensors agree on dtype and shape (except `axis` for concat); names the culprit. */
function sameKind(ts: readonly Tensor[], labels: readonly string[], exceptAxis?: number): void {
  const first = ts[0]!;
  ts.forEach((t, i) => {
    const ok =
      t.dtype === first.dtype && t.shape.length === first.shape.length && t.shape.every((d, k) => k === exceptAxis || d === first.shape[k]);
    if (!ok)
      fail(`cannot combine ${labels[i]} ${formatShape(t.dtype, t.shape)} with ${labels[0]} ${formatShape(first.dtype, first.shape)}`);
  });
  if (first.dtype === 'string' || first.dtype === 'int4' || first.dtype === 'uint4' || first.dtype === 'float16') {
    fail(`${labels[0]}: built-in combiners do not take ${first.dtype} tensors; use a fn combiner`);
  }
}

/** Element-wise mean, or weighted mean (weights normalised), accumulated in float64 and rounded once. */
export function mean(ts: readonly Tensor[], weights?: readonly number[], labels = ts.map((_, i) => `member ${i}`)): Tensor {
  sameKind(ts, labels);
  const first = ts[0]!;
  if (!FLOATS.has(first.dtype)) fail(`${labels[0]}: mean needs float32 or float64 tensors, got ${first.dtype}; use max, vote or concat`);
  const w = weights ?? ts.map(() => 1);
  const total = w.reduce((a, b) => a + b, 0);
  const n = elementCount(first.shape);
  const acc = new Float64Array(n);
  ts.forEach((t, i) => {
    const data = t.data as Float32Array | Float64Array;
    const wi = w[i]!;
    for (let k = 0; k < n; k++) acc[k]! += wi * data[k]!;
  });
  const out = first.dtype === 'float32' ? new Float32Array(n) : new Float64Array(n);
  for (let k = 0; k < n; k++) out[k] = acc[k]! / total;
  return { dtype: first.dtype, shape: [...first.shape], data: out };
}

/** Element-wise maximum; NaN wins (as Math.max would have it). */
export function max(ts: readonly Tensor[], labels = ts.map((_, i) => `member ${i}`)): Tensor {
  sameKind(ts, labels);
  const first = ts[0]!;
  const data = first.data as TypedArray;
  const out = data.slice() as TypedArray;
  for (const t of ts.slice(1)) {
    const d = t.data as TypedArray;
    for (let k = 0; k < out.length; k++) {
      const x = d[k]!;
      const m = out[k]!;
      if (x > m || (typeof x === 'number' && Number.isNaN(x))) (out as unknown as (number | bigint)[])[k] = x;
    }
  }
  return { dtype: first.dtype, shape: [...first.shape], data: out };
}

/** Index of the largest value in `data[start, start+count)`; the first one on ties, NaN never wins. */
export function argmax(data: TypedArray, start: number, count: number): number {
  let best = -1;
  for (let c = 0; c < count; c++) {
    const x = data[start + c]!;
    if (typeof x === 'number' && Number.isNaN(x)) continue;
    if (best < 0 || x > data[start + best]!) best = c;
  }
  return Math.max(best, 0);
}

/**
 * Majority vote: each member votes for the argmax of each row along the last axis; the class with
 * most votes wins, ties going to the lower class index. Returns int64 class ids of shape [...rows].
 */
export function vote(ts: readonly Tensor[], labels = ts.map((_, i) => `member ${i}`)): Tensor {
  sameKind(ts, labels);
  const first = ts[0]!;
  if (first.shape.length === 0) fail(`${labels[0]}: vote needs a class axis, got a scalar`);
  const classes = first.shape[first.shape.length - 1]!;
  if (classes === 0) fail(`${labels[0]}: vote needs at least one class, got ${formatShape(first.dtype, first.shape)}`);
  const rows = elementCount(first.shape) / classes;
  const out = new BigInt64Array(rows);
  const counts = new Uint32Array(classes);
  for (let r = 0; r < rows; r++) {
    counts.fill(0);
    for (const t of ts) counts[argmax(t.data as TypedArray, r * classes, classes)]!++;
    let winner = 0;
    for (let c = 1; c < classes; c++) if (counts[c]! > counts[winner]!) winner = c;
    out[r] = BigInt(winner);
  }
  return { dtype: 'int64', shape: first.shape.slice(0, -1), data: out };
}

/** Concatenation along `axis` (negative counts from the end), in member order. */
export function concat(ts: readonly Tensor[], axis: number, labels = ts.map((_, i) => `member ${i}`)): Tensor {
  const first = ts[0]!;
  const rank = first.shape.length;
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail(`${labels[0]}: concat axis ${axis} is outside a rank-${rank} tensor`);
  sameKind(ts, labels, a);
  const outer = elementCount(first.shape.slice(0, a));
  const blocks = ts.map((t) => elementCount(t.shape.slice(a)));
  const shape = [...first.shape];
  shape[a] = ts.reduce((sum, t) => sum + t.shape[a]!, 0);
  const Ctor = DTYPES[first.dtype as NumericDType].array;
  const out = new Ctor(elementCount(shape)) as TypedArray;
  let at = 0;
  for (let o = 0; o < outer; o++) {
    ts.forEach((t, i) => {
      const block = blocks[i]!;
      (out as Float32Array).set((t.data as Float32Array).subarray(o * block, (o + 1) * block), at);
      at += block;
    });
  }
  return { dtype: first.dtype, shape, data: out };
}

/**
 * Combines the members' outputs with a built-in combiner, output by output (see
 * {@link groupOutputs}). Throws TROUPE_ERR_BAD_SPEC naming the member and output that do not fit.
 *
 * @example
 * combineOutputs({ op: 'mean' }, [{ name: 'a', outputs: { logits: ta } }, { name: 'b', outputs: { logits: tb } }]);
 */
export function combineOutputs(
  combine: BuiltinCombine,
  members: readonly { name: string; outputs: Readonly<Record<string, Tensor>> }[],
): Record<string, Tensor> {
  const groups = groupOutputs(members.map((m) => ({ name: m.name, outputs: Object.keys(m.outputs) })));
  if (typeof groups === 'string') fail(groups);
  const out: Record<string, Tensor> = {};
  for (const g of groups) {
    const ts = g.sources.map((s, i) => members[i]!.outputs[s]!);
    const labels = g.sources.map((s, i) => `output '${s}' of member '${members[i]!.name}'`);
    switch (combine.op) {
      case 'mean':
        out[g.name] = mean(ts, combine.weights, labels);
        break;
      case 'max':
        out[g.name] = max(ts, labels);
        break;
      case 'vote':
        out[g.name] = vote(ts, labels);
        break;
      case 'concat':
        out[g.name] = concat(ts, combine.axis, labels);
        break;
    }
  }
  return out;
}
