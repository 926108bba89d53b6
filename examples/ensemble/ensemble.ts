/**
 * Three models voting. Three classifiers with different weights run at once on the same rows
 * (an ensemble graph); each row's answer is the class most of them pick. The rows are
 * standardised first by a fn step, and its result reaches the ensemble as a future: the head
 * feeds it across without sending it back through this client.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GraphBuilder, Rng } from '../../models/index.js';
import { ensemble, fn, model } from '../../runtime/index.js';
import type { Cluster, GraphDeploymentView, Tensor } from '../../runtime/index.js';

export const MEMBERS = ['judge-a', 'judge-b', 'judge-c'] as const;
const SEEDS = [101, 102, 103];
export const FEATURES = 64;
export const CLASSES = 8;

/**
 * One member: a linear classifier for "which of the 8 blocks of 8 features has the largest
 * sum", with its own random error added to the weights (as three imperfectly trained models
 * would have). They agree on clear rows and disagree on close ones, which is where voting helps.
 */
export function judgeModel(seed: number, noise = 0.5): Uint8Array {
  const rng = new Rng(seed);
  const w = new Float32Array(FEATURES * CLASSES);
  for (let i = 0; i < FEATURES; i++) {
    for (let c = 0; c < CLASSES; c++)
      w[i * CLASSES + c] = (Math.floor(i / (FEATURES / CLASSES)) === c ? 1 : 0) + rng.uniform(-noise, noise);
  }
  const g = new GraphBuilder(`judge_${seed}`);
  g.input('x', 'float32', ['N', FEATURES]);
  g.initializer('w', [FEATURES, CLASSES], w);
  g.node('MatMul', ['x', 'w'], ['logits']);
  g.output('logits', 'float32', ['N', CLASSES]);
  return g.toBytes();
}

/** Writes the three member models into `dir`. */
export async function writeEnsembleModels(dir: string): Promise<Record<string, string>> {
  const paths: Record<string, string> = {};
  for (const [i, name] of MEMBERS.entries()) {
    paths[name] = join(dir, `${name}.onnx`);
    await writeFile(paths[name], judgeModel(SEEDS[i]!));
  }
  return paths;
}

/** The graph: three members voting over their argmax. */
export function voteGraph() {
  return ensemble(
    'vote',
    MEMBERS.map((name) => model(name, { path: `${name}.onnx`, cpus: 0.25, threads: 1 })),
    { combine: 'vote' },
  );
}

export interface EnsembleResult {
  view: GraphDeploymentView;
  /** The ensemble's answer per row (class ids). */
  combined: number[];
  /** Each member's logits, by member name. */
  members: Record<string, Tensor>;
}

/** Deploys the fn step and the graph, and classifies `x` [N, FEATURES]. */
export async function runEnsemble(cluster: Cluster, x: Tensor): Promise<EnsembleResult> {
  await cluster.deploy(fn('standardize', 'examples/ensemble/steps.js#standardize', { cpus: 0.25 }));
  const view = await cluster.deploy(voteGraph());
  // Every run below is sent at once; the standardised rows never come back to this client.
  const prepared = cluster.run('standardize', { x });
  const voted = cluster.run('vote', { x: prepared });
  const members = MEMBERS.map((name) => cluster.run(name, { x: prepared }));
  const combined = [...((await voted).logits!.data as BigInt64Array)].map(Number);
  const outputs = await Promise.all(members);
  return { view, combined, members: Object.fromEntries(MEMBERS.map((name, i) => [name, outputs[i]!.logits!])) };
}

/** The class with the highest logit in each row. */
export function argmaxRows(t: Tensor): number[] {
  const [rows, classes] = t.shape as [number, number];
  const data = t.data as Float32Array;
  return Array.from({ length: rows }, (_, r) => {
    let best = 0;
    for (let c = 1; c < classes; c++) if (data[r * classes + c]! > data[r * classes + best]!) best = c;
    return best;
  });
}
