/**
 * Scoring a large batch across replicas. A dataParallel graph cuts the batch into chunks along
 * axis 0, sends them to the model's replicas at once (two in flight per replica, so none idles
 * while the next chunk travels) and concatenates the outputs in the original order.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { buildMlp } from '../../models/index.js';
import { dataParallel, model } from '../../runtime/index.js';
import type { Cluster, Tensor } from '../../runtime/index.js';

/** Writes the scorer (the repo's MLP: 64 features -> 256 -> 256 -> 10) into `dir`. */
export async function writeScorer(dir: string): Promise<string> {
  const path = join(dir, 'scorer.onnx');
  await writeFile(path, buildMlp().bytes);
  return path;
}

export interface ScoreOptions {
  replicas: number;
  chunk: number;
}

export interface ScoreResult {
  scores: Tensor;
  /** Rows per second through the dataParallel graph. */
  rowsPerSecond: number;
  /** Rows per second when the whole batch goes to one replica in one call. */
  oneCallRowsPerSecond: number;
}

/** Deploys the graph and scores `x` [N, 64] with it, and once more in one call for comparison. */
export async function score(cluster: Cluster, x: Tensor, options: ScoreOptions): Promise<ScoreResult> {
  const graph = dataParallel('score-all', model('scorer', { path: 'scorer.onnx', replicas: options.replicas, cpus: 0.25, threads: 1 }), {
    chunk: options.chunk,
  });
  await cluster.deploy(graph);
  const rows = x.shape[0]!;
  // A first pass warms sockets and allocators, so the timed ones measure steady state.
  await cluster.run('score-all', { x });
  let started = performance.now();
  const { logits } = await cluster.run('score-all', { x });
  const rowsPerSecond = rows / ((performance.now() - started) / 1000);
  started = performance.now();
  await cluster.run('scorer', { x });
  const oneCallRowsPerSecond = rows / ((performance.now() - started) / 1000);
  return { scores: logits!, rowsPerSecond, oneCallRowsPerSecond };
}
