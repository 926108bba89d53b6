import type { ModelMetadata, Tensor } from '../runtime/internal.js';
import { GRAPH_FILE, GraphModel } from './graph-model.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';

/** What an actor serves: one ONNX session, or a graph of them run in this process. */
export interface ServedModel {
  readonly metadata: ModelMetadata;
  /** The onnxruntime execution provider its sessions run on. */
  readonly provider: string;
  /** False when runs of several calls cannot be split back by rows (see graph-model.ts); else the metadata decides. */
  readonly batchable?: boolean;
  run(inputs: Record<string, Tensor>, outputs?: readonly string[]): Promise<Record<string, Tensor>>;
}

/** Loads and warms up the model file a deployment names: `*.graph.json` is a graph, anything else ONNX. */
export function loadModel(path: string, options: LoadOptions): Promise<ServedModel> {
  return GRAPH_FILE.test(path) ? GraphModel.load(path, options) : OnnxModel.load(path, options);
}
