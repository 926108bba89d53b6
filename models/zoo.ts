/**
 * Example models generated from a seed: an MLP, a small CNN and a MobileNetV2-shaped CNN.
 * Weights are random (not trained) but scaled so activations stay finite and non-trivial,
 * which is all serving tests and benchmarks need. Every builder returns the layered
 * description too, so callers can emit pipeline stages with `emitModel`/`emitStages`.
 */
import { emitModel } from './layered.js';
import type { Layer, LayeredModel } from './layered.js';
import { convOutSize, convWeights, denseWeights, emitConv, emitDense, emitPoolClassifier } from './layers.js';
import type { DenseWeights } from './layers.js';
import { Rng } from './random.js';

/** A built model: the ONNX bytes of the whole model plus its layered description. */
export interface BuiltModel {
  bytes: Uint8Array;
  spec: LayeredModel;
}

/** The seed every builder uses unless told otherwise. */
export const DEFAULT_SEED = 1;

/** Options for `buildMlp`. */
export interface MlpOptions {
  /** Default 64. */
  inputDim?: number;
  /** Hidden layer widths; default [256, 256]. */
  hidden?: number[];
  /** Default 10. */
  outputDim?: number;
  seed?: number;
}

/** The MLP plus its raw weights, in layer order: ReLU follows every layer but the last. */
export interface MlpModel extends BuiltModel {
  weights: DenseWeights[];
}

/** MLP `x` float32 [N, 64] → (MatMul+Add+Relu) × hidden → MatMul+Add → `logits` [N, 10]. */
export function buildMlp(opts: MlpOptions = {}): MlpModel {
  const dims = [opts.inputDim ?? 64, ...(opts.hidden ?? [256, 256]), opts.outputDim ?? 10];
  const rng = new Rng(opts.seed ?? DEFAULT_SEED);
  const weights: DenseWeights[] = [];
  const layers: Layer[] = [];
  for (let i = 0; i + 1 < dims.length; i++) {
    const last = i + 2 === dims.length;
    // A fork per layer keeps each layer's weights independent of how many values others draw.
    const dw = denseWeights(rng.fork(), dims[i]!, dims[i + 1]!, last ? 'lecun' : 'he');
    const name = last ? 'fc_out' : `fc${i}`;
    weights.push(dw);
    layers.push({
      name,
      outDims: ['N', dw.outDim],
      emit: (g, input, output) => emitDense(g, name, input, output, dw, last ? 'none' : 'relu'),
    });
  }
  const spec: LayeredModel = {
    name: 'troupe_mlp',
    input: { name: 'x', dtype: 'float32', dims: ['N', dims[0]!] },
    outputName: 'logits',
    layers,
  };
  return { bytes: emitModel(spec), spec, weights };
}

/** Options for `buildSmallCnn`. */
export interface SmallCnnOptions {
  /** Square input size; default 32. */
  imageSize?: number;
  /** Conv+Relu stages, 3×3 kernels; default [{16, stride 1}, {32, stride 2}]. */
  convs?: { channels: number; stride: number }[];
  /** Default 10. */
  numClasses?: number;
  seed?: number;
}

/** Small CNN: `image` [N, 3, 32, 32] → Conv+Relu ×2 → GAP → Flatten → Gemm → `logits` [N, 10]. */
export function buildSmallCnn(opts: SmallCnnOptions = {}): BuiltModel {
  const rng = new Rng(opts.seed ?? DEFAULT_SEED);
  const size0 = opts.imageSize ?? 32;
  const layers: Layer[] = [];
  let c = 3;
  let size = size0;
  const convs = opts.convs ?? [
    { channels: 16, stride: 1 },
    { channels: 32, stride: 2 },
  ];
  convs.forEach(({ channels, stride }, i) => {
    const cw = convWeights(rng.fork(), { cin: c, cout: channels, kernel: 3, init: 'he' });
    const name = `conv${i}`;
    size = convOutSize(size, 3, stride, 1);
    layers.push({ name, outDims: ['N', channels, size, size], emit: (g, x, y) => emitConv(g, name, x, y, cw, { stride, act: 'relu' }) });
    c = channels;
  });
  const numClasses = opts.numClasses ?? 10;
  const fc = denseWeights(rng.fork(), c, numClasses, 'lecun');
  layers.push({ name: 'classifier', outDims: ['N', numClasses], emit: (g, x, y) => emitPoolClassifier(g, 'classifier', x, y, fc) });
  const spec: LayeredModel = {
    name: 'troupe_small_cnn',
    input: { name: 'image', dtype: 'float32', dims: ['N', 3, size0, size0] },
    outputName: 'logits',
    layers,
  };
  return { bytes: emitModel(spec), spec };
}

/** MobileNetV2 inverted-residual config rows: expansion t, channels c, repeats n, first stride s. */
export const MOBILENET_V2_CONFIG: readonly (readonly [t: number, c: number, n: number, s: number])[] = [
  [1, 16, 1, 1],
  [6, 24, 2, 2],
  [6, 32, 3, 2],
  [6, 64, 4, 2],
  [6, 96, 3, 1],
  [6, 160, 3, 2],
  [6, 320, 1, 1],
];

/** Options for `buildMobileNetV2Like`. */
export interface MobileNetV2Options {
  /** Channel width multiplier (0.35, 0.5, 0.75, 1.0, 1.4 are the usual ones); default 1. */
  widthMultiplier?: number;
  /** Square input size; default 224. */
  resolution?: number;
  /** Default 1000. */
  numClasses?: number;
  seed?: number;
}

// Channel rounding as in the reference implementation, so widths match published variants.
function makeDivisible(v: number, divisor = 8): number {
  const rounded = Math.max(divisor, Math.floor((v + divisor / 2) / divisor) * divisor);
  return rounded < 0.9 * v ? rounded + divisor : rounded;
}

/**
 * MobileNetV2-shaped CNN with BatchNorm folded away: stem 3×3 s2 conv → 17 inverted-residual
 * blocks → 1×1 conv to 1280 → GAP → Flatten → Gemm. `image` [N, 3, 224, 224] → `logits`
 * [N, 1000]. Layers: `stem`, `block0`…`block16`, `head`, `classifier` (cut anywhere between).
 */
export function buildMobileNetV2Like(opts: MobileNetV2Options = {}): BuiltModel {
  const alpha = opts.widthMultiplier ?? 1;
  const res = opts.resolution ?? 224;
  const numClasses = opts.numClasses ?? 1000;
  const rng = new Rng(opts.seed ?? DEFAULT_SEED);
  const layers: Layer[] = [];

  let c = makeDivisible(32 * alpha);
  let size = convOutSize(res, 3, 2, 1);
  const stem = convWeights(rng.fork(), { cin: 3, cout: c, kernel: 3, init: 'he' });
  layers.push({
    name: 'stem',
    outDims: ['N', c, size, size],
    emit: (g, x, y) => emitConv(g, 'stem', x, y, stem, { stride: 2, act: 'relu6' }),
  });

  let blockIndex = 0;
  for (const [t, ch, n, s] of MOBILENET_V2_CONFIG) {
    const cout = makeDivisible(ch * alpha);
    for (let r = 0; r < n; r++) {
      const stride = r === 0 ? s : 1;
      size = convOutSize(size, 3, stride, 1);
      layers.push(invertedResidual(rng.fork(), `block${blockIndex++}`, { cin: c, cout, t, stride }, ['N', cout, size, size]));
      c = cout;
    }
  }

  const last = makeDivisible(1280 * Math.max(1, alpha));
  const head = convWeights(rng.fork(), { cin: c, cout: last, kernel: 1, init: 'he' });
  layers.push({ name: 'head', outDims: ['N', last, size, size], emit: (g, x, y) => emitConv(g, 'head', x, y, head, { act: 'relu6' }) });
  const fc = denseWeights(rng.fork(), last, numClasses, 'lecun');
  layers.push({ name: 'classifier', outDims: ['N', numClasses], emit: (g, x, y) => emitPoolClassifier(g, 'classifier', x, y, fc) });

  const spec: LayeredModel = {
    name: 'troupe_mobilenet_v2_like',
    input: { name: 'image', dtype: 'float32', dims: ['N', 3, res, res] },
    outputName: 'logits',
    layers,
  };
  return { bytes: emitModel(spec), spec };
}

/**
 * One inverted-residual block: 1×1 expand + Clip(0,6) (skipped when t = 1), 3×3 depthwise
 * + Clip(0,6), 1×1 linear projection, and a residual Add when shape is preserved.
 */
function invertedResidual(
  rng: Rng,
  name: string,
  b: { cin: number; cout: number; t: number; stride: number },
  outDims: Layer['outDims'],
): Layer {
  const hidden = b.cin * b.t;
  const expand = b.t === 1 ? null : convWeights(rng, { cin: b.cin, cout: hidden, kernel: 1, init: 'he' });
  const depthwise = convWeights(rng, { cin: hidden, cout: hidden, kernel: 3, group: hidden, init: 'he' });
  const project = convWeights(rng, { cin: hidden, cout: b.cout, kernel: 1, init: 'lecun' });
  const residual = b.stride === 1 && b.cin === b.cout;
  return {
    name,
    outDims,
    emit(g, input, output) {
      let x = input;
      if (expand) {
        const y = g.fresh(`${name}_expand_out`);
        emitConv(g, `${name}_expand`, x, y, expand, { act: 'relu6' });
        x = y;
      }
      const dw = g.fresh(`${name}_dw_out`);
      emitConv(g, `${name}_dw`, x, dw, depthwise, { stride: b.stride, act: 'relu6' });
      const proj = residual ? g.fresh(`${name}_project_out`) : output;
      emitConv(g, `${name}_project`, dw, proj, project, { act: 'none' });
      if (residual) g.node('Add', [input, proj], [output]);
    },
  };
}
