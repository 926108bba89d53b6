/**
 * Weight-carrying building blocks shared by the model zoo. Each block is split in two:
 * `*Weights` draws the parameters (once, when a model description is built) and `emit*`
 * writes nodes and initializers into a graph. Keeping them apart is what lets a layered
 * model emit any slice of itself with the same weights.
 */
import { attr } from './onnx-builder.js';
import type { GraphBuilder } from './onnx-builder.js';
import { heUniform, lecunUniform, uniformArray } from './random.js';
import type { Rng } from './random.js';

/** 'he' before ReLU-like activations, 'lecun' before none (see random.ts). */
export type Init = 'he' | 'lecun';

/** Activation applied after a block. 'relu6' is Clip(0, 6), as in MobileNetV2. */
export type Activation = 'none' | 'relu' | 'relu6';

/** A fully connected layer: `y = x · w + b`, `w` row-major [inDim, outDim]. */
export interface DenseWeights {
  inDim: number;
  outDim: number;
  w: Float32Array;
  b: Float32Array;
}

/** A 2-D convolution: `w` is [cout, cin/group, kernel, kernel], `b` is [cout]. */
export interface ConvWeights {
  cin: number;
  cout: number;
  kernel: number;
  group: number;
  w: Float32Array;
  b: Float32Array;
}

function initWeights(rng: Rng, count: number, fanIn: number, init: Init): Float32Array {
  return init === 'he' ? heUniform(rng, count, fanIn) : lecunUniform(rng, count, fanIn);
}

// PyTorch's default bias init, U(±1/√fanIn): nonzero so tests notice a dropped Add, but
// small enough not to shift activation scale.
function biasInit(rng: Rng, count: number, fanIn: number): Float32Array {
  return uniformArray(rng, count, 1 / Math.sqrt(fanIn));
}

/** Draws a dense layer's weights then biases from `rng`. */
export function denseWeights(rng: Rng, inDim: number, outDim: number, init: Init): DenseWeights {
  return { inDim, outDim, w: initWeights(rng, inDim * outDim, inDim, init), b: biasInit(rng, outDim, inDim) };
}

/** Draws a convolution's weights then biases from `rng`. `group` = cin gives depthwise. */
export function convWeights(rng: Rng, spec: { cin: number; cout: number; kernel: number; group?: number; init: Init }): ConvWeights {
  const group = spec.group ?? 1;
  if (spec.cin % group !== 0 || spec.cout % group !== 0) {
    throw new Error(`conv group ${group} must divide cin ${spec.cin} and cout ${spec.cout}`);
  }
  const fanIn = (spec.cin / group) * spec.kernel * spec.kernel;
  return {
    cin: spec.cin,
    cout: spec.cout,
    kernel: spec.kernel,
    group,
    w: initWeights(rng, spec.cout * fanIn, fanIn, spec.init),
    b: biasInit(rng, spec.cout, fanIn),
  };
}

/** Spatial output size of a convolution with symmetric padding. */
export function convOutSize(size: number, kernel: number, stride: number, pad: number): number {
  return Math.floor((size + 2 * pad - kernel) / stride) + 1;
}

/** Writes `act(input)` into `output` (an Identity when act is 'none'). */
export function emitActivation(g: GraphBuilder, act: Activation, input: string, output: string): void {
  if (act === 'relu') {
    g.node('Relu', [input], [output]);
  } else if (act === 'relu6') {
    // Opset 13 Clip takes its bounds as (scalar) inputs, not attributes; one shared pair per graph.
    if (!g.has('relu6_min')) g.initializer('relu6_min', [], new Float32Array([0]));
    if (!g.has('relu6_max')) g.initializer('relu6_max', [], new Float32Array([6]));
    g.node('Clip', [input, 'relu6_min', 'relu6_max'], [output]);
  } else {
    g.node('Identity', [input], [output]);
  }
}

/** MatMul + Add (+ activation) reading [N, inDim] and writing [N, outDim]. */
export function emitDense(g: GraphBuilder, prefix: string, input: string, output: string, dw: DenseWeights, act: Activation): void {
  const w = g.initializer(`${prefix}_w`, [dw.inDim, dw.outDim], dw.w);
  const b = g.initializer(`${prefix}_b`, [dw.outDim], dw.b);
  const mm = g.fresh(`${prefix}_matmul`);
  g.node('MatMul', [input, w], [mm]);
  if (act === 'none') {
    g.node('Add', [mm, b], [output]);
    return;
  }
  const pre = g.fresh(`${prefix}_add`);
  g.node('Add', [mm, b], [pre]);
  emitActivation(g, act, pre, output);
}

/** Conv (bias folded in, "same" padding for odd kernels) + optional activation, NCHW. */
export function emitConv(
  g: GraphBuilder,
  prefix: string,
  input: string,
  output: string,
  cw: ConvWeights,
  opts: { stride?: number; act: Activation },
): void {
  const w = g.initializer(`${prefix}_w`, [cw.cout, cw.cin / cw.group, cw.kernel, cw.kernel], cw.w);
  const b = g.initializer(`${prefix}_b`, [cw.cout], cw.b);
  const stride = opts.stride ?? 1;
  const pad = (cw.kernel - 1) >> 1;
  const convOut = opts.act === 'none' ? output : g.fresh(`${prefix}_conv`);
  g.node('Conv', [input, w, b], [convOut], {
    kernel_shape: attr.ints([cw.kernel, cw.kernel]),
    strides: attr.ints([stride, stride]),
    pads: attr.ints([pad, pad, pad, pad]),
    group: attr.int(cw.group),
  });
  if (opts.act !== 'none') emitActivation(g, opts.act, convOut, output);
}

/** GlobalAveragePool + Flatten + Gemm: [N, C, H, W] to [N, outDim] logits. */
export function emitPoolClassifier(g: GraphBuilder, prefix: string, input: string, output: string, dw: DenseWeights): void {
  const w = g.initializer(`${prefix}_w`, [dw.inDim, dw.outDim], dw.w);
  const b = g.initializer(`${prefix}_b`, [dw.outDim], dw.b);
  const pooled = g.fresh(`${prefix}_pool`);
  const flat = g.fresh(`${prefix}_flat`);
  g.node('GlobalAveragePool', [input], [pooled]);
  g.node('Flatten', [pooled], [flat], { axis: attr.int(1) });
  g.node('Gemm', [flat, w, b], [output], { alpha: attr.float(1), beta: attr.float(1) });
}
