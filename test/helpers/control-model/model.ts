/**
 * The reference model of the control plane (plain data): what is deployed, as the commands of
 * the model-based test (control-plane-model.test.ts) changed it, and from it, which model file
 * may answer each probe. The test's real cluster must agree with it after every command.
 */

export interface VersionRef {
  version: string;
  /** The model file the version runs (mlp-N.onnx: each gives distinguishable outputs). */
  file: string;
  weight: number;
}

export type DeploymentRef =
  | { kind: 'plain'; file: string }
  | { kind: 'split'; versions: VersionRef[]; promotedFrom?: VersionRef[] | undefined }
  /** Autoscaled from zero: no replica until a call. */
  | { kind: 'zero'; file: string }
  /** Multiplexed: member name -> the file copied in as `<member>.onnx`. */
  | { kind: 'mux'; members: Record<string, string> };

export interface ModelState {
  deployments: Map<string, DeploymentRef>;
  /** The graph `g`: a pipeline of one model step, the deployment `over`. */
  graph: { over: string } | undefined;
  /** The class actor `ctr` (test/fixtures/classes.js Counter, with checkpoint()). */
  counter: { total: number; checkpointed: boolean; lostUnseen?: boolean } | undefined;
}

export function emptyModel(): ModelState {
  return { deployments: new Map(), graph: undefined, counter: undefined };
}

/**
 * What may answer a call to `name` (a deployment, a multiplexed set's `set:member`, or the graph): version -> file for a split
 * (the answer must name its version, and only versions with weight take calls), else the one file
 * under the version "1" ('' for the SDK, which names none).
 */
export function allowedAnswers(m: ModelState, name: string): Map<string, string> {
  if (name === 'g' && m.graph) return allowedAnswers(m, m.graph.over);
  const [deployment, member] = name.split(':') as [string, string | undefined];
  const set = m.deployments.get(deployment);
  if (member !== undefined && set?.kind === 'mux' && set.members[member] !== undefined) return new Map([['1', set.members[member]]]);
  const d = m.deployments.get(name);
  if (!d) throw new Error(`the model has no deployment '${name}'`);
  if (d.kind === 'split') return new Map(d.versions.filter((v) => v.weight > 0).map((v) => [v.version, v.file]));
  if (d.kind === 'mux') throw new Error(`'${name}' is multiplexed: its members answer, not it`);
  return new Map([['1', d.file]]);
}

/** The spec a model deployment is PUT with (small replicas: the test machine has two cores). */
export function specOf(d: DeploymentRef): Record<string, unknown> {
  const small = { cpus: 0.1, threads: 1 };
  switch (d.kind) {
    case 'plain':
      return { ...small, model: d.file };
    case 'split':
      return { ...small, versions: d.versions.map((v) => ({ version: v.version, model: v.file, weight: v.weight })) };
    case 'zero':
      return { ...small, model: d.file, replicas: 0, autoscale: { minReplicas: 0, maxReplicas: 1, downDelayMs: 60_000 } };
    case 'mux':
      return { ...small, model: 'set', multiplex: { maxModels: 2 } };
  }
}
