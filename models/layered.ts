/**
 * A model described as a straight chain of layers, so one description can emit the whole
 * model or any contiguous slice of it. Slices are what pipeline sharding runs: stage k's
 * output tensor is stage k+1's input, with the same name, dtype and shape, and running the
 * stages back to back computes exactly what the whole model computes (same weights, same
 * ops; only the graph boundary moves).
 */
import { GraphBuilder } from './onnx-builder.js';
import type { DType, Dim, ModelOptions, TensorSpec } from './onnx-builder.js';

/** One link of the chain: reads one tensor, writes one tensor. */
export interface Layer {
  /** Unique within the model; prefixes the layer's initializer names and names its output. */
  name: string;
  /** Shape of this layer's output, symbolic batch included (e.g. `['N', 32, 112, 112]`). */
  outDims: Dim[];
  /** Output element type; default 'float32'. */
  outDtype?: DType;
  /**
   * Adds the layer's initializers and nodes to `g`, reading tensor `input` and writing
   * tensor `output`. Weights must already exist (created when the description was built),
   * so emitting a slice never depends on which other layers are emitted.
   */
  emit(g: GraphBuilder, input: string, output: string): void;
}

/** A whole model as a chain of layers. */
export interface LayeredModel {
  /** Graph name. */
  name: string;
  /** The model input (e.g. `image` [N,3,224,224]). */
  input: TensorSpec;
  /** Name of the model output; its dtype and dims come from the last layer. */
  outputName: string;
  layers: Layer[];
}

/** A half-open layer range `[start, end)`; defaults to the whole model. */
export interface LayerRange {
  start?: number;
  end?: number;
}

/**
 * The tensor that flows *into* layer `index` (0 ≤ index ≤ layers.length): the model input
 * for 0, the model output for layers.length, otherwise `<previous layer name>_out`.
 */
export function boundaryTensor(model: LayeredModel, index: number): TensorSpec {
  const n = model.layers.length;
  if (!Number.isInteger(index) || index < 0 || index > n) {
    throw new RangeError(`boundary index ${index} outside [0, ${n}] for model '${model.name}'`);
  }
  if (index === 0) return model.input;
  const prev = model.layers[index - 1]!;
  return {
    name: index === n ? model.outputName : `${prev.name}_out`,
    dtype: prev.outDtype ?? 'float32',
    dims: prev.outDims,
  };
}

/**
 * Serialises layers `[start, end)` as a standalone ONNX model whose input and output are
 * the boundary tensors at `start` and `end` (see `boundaryTensor`).
 */
export function emitModel(model: LayeredModel, range: LayerRange = {}, opts: ModelOptions = {}): Uint8Array {
  const n = model.layers.length;
  const start = range.start ?? 0;
  const end = range.end ?? n;
  if (!(start >= 0 && start < end && end <= n)) {
    throw new RangeError(`layer range [${start}, ${end}) is empty or outside [0, ${n}) for '${model.name}'`);
  }
  const whole = start === 0 && end === n;
  const g = new GraphBuilder(whole ? model.name : `${model.name}_layers_${start}_${end}`);
  const inSpec = boundaryTensor(model, start);
  g.input(inSpec.name, inSpec.dtype, inSpec.dims);
  for (let i = start; i < end; i++) {
    model.layers[i]!.emit(g, boundaryTensor(model, i).name, boundaryTensor(model, i + 1).name);
  }
  const outSpec = boundaryTensor(model, end);
  g.output(outSpec.name, outSpec.dtype, outSpec.dims);
  return g.toBytes(opts);
}

/**
 * Splits the model into consecutive stages at the given cut points (layer indices,
 * strictly increasing, each in (0, layers.length)); returns one ONNX model per stage.
 */
export function emitStages(model: LayeredModel, cuts: number[], opts: ModelOptions = {}): Uint8Array[] {
  const bounds = [0, ...cuts, model.layers.length];
  const stages: Uint8Array[] = [];
  for (let k = 0; k + 1 < bounds.length; k++) {
    stages.push(emitModel(model, { start: bounds[k]!, end: bounds[k + 1]! }, opts));
  }
  return stages;
}
