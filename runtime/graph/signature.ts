import { TroupeError } from '../errors.js';
import type { ModelMetadata, TensorInfo } from '../protocol/common.js';
import { formatShape } from '../tensor/tensor.js';
import { groupOutputs } from './combiners.js';
import { leafKey } from './compile.js';
import type { PlanEnsemble, PlanNode, PlanPipeline } from './compile.js';
import { sourceOf } from './wiring.js';

/**
 * What a step takes and gives, as far as it is known before any call. `null` means dynamic:
 * a fn that declares no signature, or anything downstream of one that the rules cannot see through.
 */
export interface Signature {
  inputs: TensorInfo[] | null;
  outputs: TensorInfo[] | null;
}

/** A leaf's metadata as the head holds it; a fn that declares nothing is dynamic. */
export interface LeafInfo {
  kind: 'model' | 'fn';
  metadata: ModelMetadata | null;
}

/** A fn actor with no declared signature reports empty metadata: its inputs are not checked. */
export function isDynamic(leaf: LeafInfo): boolean {
  return !leaf.metadata || (leaf.kind === 'fn' && leaf.metadata.inputs.length === 0 && leaf.metadata.outputs.length === 0);
}

function bad(message: string): never {
  throw new TroupeError('TROUPE_ERR_BAD_SPEC', message);
}

const show = (t: TensorInfo) => formatShape(t.dtype, t.shape);

/** Whether a tensor of `got`'s type may flow into `want`: same dtype, and no fixed dim that differs. */
export function fits(got: TensorInfo, want: TensorInfo): boolean {
  if (got.dtype !== want.dtype) return false;
  if (got.shape.length === 0 || want.shape.length === 0) return true;
  if (got.shape.length !== want.shape.length) return false;
  return got.shape.every((d, i) => {
    const w = want.shape[i]!;
    return typeof d !== 'number' || typeof w !== 'number' || d < 0 || w < 0 || d === w;
  });
}

/**
 * Infers the signature of a plan from its leaves' metadata, refusing (TROUPE_ERR_BAD_SPEC) a step
 * input that nothing produces and a dtype or shape that does not fit where tensors connect; the
 * message names the step and the tensor.
 *
 * @example
 * const { inputs, outputs } = inferSignature(compiled.root, (name) => ({ kind: 'model', metadata: metadataOf(name) }));
 */
export function inferSignature(plan: PlanNode, leaf: (name: string) => LeafInfo): Signature {
  const memo = new Map<PlanNode, Signature>();
  const sig = (p: PlanNode): Signature => {
    const known = memo.get(p);
    if (known) return known;
    let s: Signature;
    switch (p.kind) {
      case 'model':
      case 'fn':
      case 'method': {
        const info = leaf(leafKey(p));
        s = isDynamic(info) ? { inputs: null, outputs: null } : { inputs: info.metadata!.inputs, outputs: info.metadata!.outputs };
        break;
      }
      case 'pipeline':
        s = pipelineSignature(p, p.steps.map(sig));
        break;
      case 'ensemble':
        s = ensembleSignature(p, p.members.map(sig), p.combine.op === 'fn' ? sig(p.combine.fn) : undefined);
        break;
      case 'dataParallel':
        s = dataParallelSignature(p.name, p.chunk, sig(p.step));
        break;
    }
    memo.set(p, s);
    return s;
  };
  return sig(plan);
}

function pipelineSignature(p: PlanPipeline, sigs: Signature[]): Signature {
  // Every value so far, with the step that made it, as the executor will hold them.
  const values = new Map<string, { info: TensorInfo; from: string }>();
  let open = false; // some value so far is of unknown name or type
  const first = sigs[0]!;
  if (first.inputs) for (const i of first.inputs) values.set(i.name, { info: i, from: `the input of pipeline '${p.name}'` });
  else open = true;
  let previous: TensorInfo[] | null = null;
  sigs.forEach((s, k) => {
    const step = p.steps[k]!;
    if (k > 0 && s.inputs && previous) {
      for (const want of s.inputs) {
        const src = sourceOf(want.name, {
          step: step.name,
          wants: s.inputs.length,
          previous: previous.map((o) => o.name),
          has: (n) => values.has(n),
          map: p.map,
        });
        if (!src) {
          if (open) continue;
          const prev = p.steps[k - 1]!;
          const gives = previous.map((o) => `'${o.name}' ${show(o)}`).join(', ') || 'nothing';
          const earlier = [...values.keys()]
            .filter((n) => !previous!.some((o) => o.name === n))
            .map((n) => `'${n}'`)
            .join(', ');
          bad(
            `pipeline '${p.name}' step '${step.name}' needs input '${want.name}' ${show(want)}, which nothing produces: ` +
              `step '${prev.name}' gives ${gives}${earlier ? `; earlier values are ${earlier}` : ''}. Name it in the pipeline's map, e.g. { from: '${previous[0]?.name ?? 'x'}', to: '${want.name}' }`,
          );
        }
        const got = values.get(src.name)!;
        if (!fits(got.info, want)) {
          bad(
            `pipeline '${p.name}' step '${step.name}' input '${want.name}' expects ${show(want)}, but gets '${src.name}' ${show(got.info)} from ${got.from}`,
          );
        }
      }
    }
    previous = s.outputs;
    if (s.outputs) for (const o of s.outputs) values.set(o.name, { info: o, from: `step '${step.name}'` });
    else open = true;
  });
  return { inputs: first.inputs, outputs: sigs[sigs.length - 1]!.outputs };
}

function ensembleSignature(p: PlanEnsemble, sigs: Signature[], combiner: Signature | undefined): Signature {
  let inputs: TensorInfo[] | null = [];
  const seen = new Map<string, { info: TensorInfo; member: string }>();
  sigs.forEach((s, i) => {
    const member = p.members[i]!.name;
    if (!s.inputs || !inputs) {
      inputs = null;
      return;
    }
    for (const want of s.inputs) {
      const other = seen.get(want.name);
      if (!other) {
        seen.set(want.name, { info: want, member });
        inputs.push(want);
      } else if (!fits(other.info, want) && !fits(want, other.info)) {
        bad(
          `ensemble '${p.name}': members '${other.member}' and '${member}' disagree on input '${want.name}': ${show(other.info)} vs ${show(want)}`,
        );
      }
    }
  });
  if (p.combine.op === 'fn') return { inputs, outputs: combiner?.outputs ?? null };
  if (sigs.some((s) => !s.outputs)) return { inputs, outputs: null };
  const members = sigs.map((s, i) => ({ name: p.members[i]!.name, outputs: s.outputs! }));
  const groups = groupOutputs(members.map((m) => ({ name: m.name, outputs: m.outputs.map((o) => o.name) })));
  if (typeof groups === 'string') bad(`ensemble '${p.name}': ${groups}`);
  const combine = p.combine;
  const outputs = groups.map((g): TensorInfo => {
    const infos = g.sources.map((src, i) => members[i]!.outputs.find((o) => o.name === src)!);
    const first = infos[0]!;
    const rank = first.shape.length;
    const axis = combine.op === 'concat' ? (combine.axis < 0 ? combine.axis + rank : combine.axis) : -1;
    infos.forEach((info, i) => {
      const sameType = info.dtype === first.dtype && (rank === 0 || info.shape.length === 0 || info.shape.length === rank);
      const dimsFit =
        sameType &&
        info.shape.every((d, k) => k === axis || typeof d !== 'number' || typeof first.shape[k] !== 'number' || d === first.shape[k]);
      if (!dimsFit)
        bad(
          `ensemble '${p.name}' cannot ${combine.op} output '${g.name}': member '${members[i]!.name}' gives ${show(info)} but member '${members[0]!.name}' gives ${show(first)}`,
        );
    });
    if (combine.op === 'mean' && first.dtype !== 'float32' && first.dtype !== 'float64') {
      bad(`ensemble '${p.name}': mean needs float32 or float64 outputs, but '${g.name}' is ${first.dtype}; use max, vote or concat`);
    }
    if (combine.op === 'vote') {
      if (rank === 0 && first.shape.length === 0) return { name: g.name, dtype: 'int64', shape: [] };
      return { name: g.name, dtype: 'int64', shape: first.shape.slice(0, -1) };
    }
    if (combine.op === 'concat') {
      if (rank > 0 && (axis < 0 || axis >= rank))
        bad(`ensemble '${p.name}': concat axis ${combine.axis} is outside output '${g.name}' ${show(first)}`);
      const dims = infos.map((info) => info.shape[axis]);
      const shape = [...first.shape];
      if (rank > 0)
        shape[axis] = dims.every((d) => typeof d === 'number') ? (dims as number[]).reduce((a, b) => a + b, 0) : `concat_${g.name}`;
      return { name: g.name, dtype: first.dtype, shape };
    }
    return { ...first, name: g.name };
  });
  return { inputs, outputs };
}

function dataParallelSignature(name: string, chunk: number, inner: Signature): Signature {
  const batched = (infos: TensorInfo[] | null, role: 'input' | 'output'): TensorInfo[] | null =>
    infos?.map((t) => {
      if (t.shape.length === 0) return t; // unknown shape: checked at run time
      const d0 = t.shape[0]!;
      if (role === 'input' && typeof d0 === 'number' && d0 >= 0 && d0 !== chunk) {
        bad(
          `dataParallel '${name}': input '${t.name}' has a fixed batch size of ${d0} (${show(t)}) but chunks are ${chunk} rows; set chunk to ${d0}`,
        );
      }
      return { ...t, shape: ['batch', ...t.shape.slice(1)] };
    }) ?? null;
  return { inputs: batched(inner.inputs, 'input'), outputs: batched(inner.outputs, 'output') };
}

/**
 * The input names a step takes, for wiring at run time: a leaf's declared inputs, a pipeline's
 * first step's, the union of an ensemble's members'; null when a dynamic fn leaves them open.
 */
export function inputNames(plan: PlanNode, leaf: (name: string) => LeafInfo): string[] | null {
  switch (plan.kind) {
    case 'model':
    case 'fn':
    case 'method': {
      const info = leaf(leafKey(plan));
      return isDynamic(info) ? null : info.metadata!.inputs.map((i) => i.name);
    }
    case 'pipeline':
      return inputNames(plan.steps[0]!, leaf);
    case 'dataParallel':
      return inputNames(plan.step, leaf);
    case 'ensemble': {
      const names = new Set<string>();
      for (const m of plan.members) {
        const own = inputNames(m, leaf);
        if (own === null) return null;
        for (const n of own) names.add(n);
      }
      return [...names];
    }
  }
}
