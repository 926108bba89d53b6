/**
 * Model sharding for a model too big for one device: one ONNX model cut into two stage models at
 * a tensor boundary with the repo's model tooling (models/layered.ts), each stage pinned to its
 * own GPU, run as a pipeline. Stage 0's output tensor is stage 1's input, with the same name, so
 * the pipeline wires them by name.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { boundaryTensor, buildMobileNetV2Like, emitStages } from '../../models/index.js';
import type { MobileNetV2Options } from '../../models/index.js';
import { model, pipeline } from '../../runtime/index.js';

/**
 * The layer the cut goes before: block10, the first block of MobileNetV2's 96-channel stage. No
 * residual connection crosses it. Where one does, onnxruntime fuses the residual Add into the
 * convolution in one graph but not across two, and results move by ~1e-6; at this cut the two
 * stages compute exactly what the whole model computes.
 */
export const CUT_BEFORE = 'block10';

export interface ShardedModels {
  whole: string;
  stages: [string, string];
  /** The tensor that crosses the cut, e.g. 'block9_out' float32 [N,64,14,14]. */
  boundary: string;
}

/** Builds the MobileNetV2-shaped model, writes it whole and as two stages into `dir`. */
export async function writeShardedModels(dir: string, options: MobileNetV2Options = {}): Promise<ShardedModels> {
  const { bytes, spec } = buildMobileNetV2Like(options);
  const cut = spec.layers.findIndex((l) => l.name === CUT_BEFORE);
  const [first, second] = emitStages(spec, [cut]);
  const paths: ShardedModels = {
    whole: join(dir, 'mobilenet-whole.onnx'),
    stages: [join(dir, 'mobilenet-stage0.onnx'), join(dir, 'mobilenet-stage1.onnx')],
    boundary: boundaryTensor(spec, cut).name,
  };
  await writeFile(paths.whole, bytes);
  await writeFile(paths.stages[0], first!);
  await writeFile(paths.stages[1], second!);
  return paths;
}

/** The pipeline: each stage on a whole GPU of its own. */
export function shardedGraph() {
  return pipeline('sharded', [
    model('stage0', { path: 'mobilenet-stage0.onnx', gpus: 1, cpus: 0.25, threads: 1 }),
    model('stage1', { path: 'mobilenet-stage1.onnx', gpus: 1, cpus: 0.25, threads: 1 }),
  ]);
}
