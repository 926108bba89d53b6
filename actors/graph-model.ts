import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import {
  GraphDocumentSchema,
  TroupeError,
  compileGraph,
  execute,
  formatIssues,
  fromWire,
  inferSignature,
  leavesOf,
  mapFromWire,
  mapToWire,
  resolveModelPath,
} from '../runtime/internal.js';
import type { GraphDocument, LeafInfo, ModelMetadata, PlanNode, StepCaller, Tensor } from '../runtime/internal.js';
import { OnnxModel } from './onnx-model.js';
import type { LoadOptions } from './onnx-model.js';

/**
 * Whether some ensemble of the plan joins its members' outputs along axis 0: then a run's output
 * rows are not its input rows, and runs of several calls could not be split back.
 */
function concatsRows(plan: PlanNode, leaf: (name: string) => LeafInfo): boolean {
  switch (plan.kind) {
    case 'model':
    case 'fn':
    case 'method':
      return false;
    case 'pipeline':
      return plan.steps.some((s) => concatsRows(s, leaf));
    case 'dataParallel':
      return concatsRows(plan.step, leaf);
    case 'ensemble': {
      if (plan.members.some((m) => concatsRows(m, leaf))) return true;
      if (plan.combine.op !== 'concat') return false;
      const rank = inferSignature(plan.members[0]!, leaf).outputs?.[0]?.shape.length ?? 0;
      return (plan.combine.axis < 0 ? plan.combine.axis + rank : plan.combine.axis) === 0;
    }
  }
}

function fail(path: string, message: string): TroupeError {
  return new TroupeError('TROUPE_ERR_MODEL_LOAD', `graph file '${path}': ${message}`);
}

/** Steps that cannot run in this process: fn steps (they run in fn actors) and options that only a deployment takes. */
function checkServable(doc: GraphDocument, path: string): void {
  for (const node of doc.nodes) {
    if (node.kind === 'method')
      throw fail(
        path,
        `method '${node.name}': a graph served by one actor holds model steps only (class actors run in their own processes)`,
      );
    if (node.kind === 'fn')
      throw fail(
        path,
        `fn '${node.name}': a graph served by one actor holds model steps only (fn steps run in fn actors; deploy the graph itself for those)`,
      );
    if (node.kind !== 'model') continue;
    if (node.model === undefined)
      throw fail(
        path,
        `model '${node.name}' has no model path: every model of a graph served by one actor is loaded from a file next to the graph file`,
      );
    const options = Object.keys(node).filter((k) => !['kind', 'name', 'model'].includes(k));
    if (options.length > 0)
      throw fail(
        path,
        `model '${node.name}' has deployment options (${options.join(', ')}); its models share the deployment's replicas, threads and batching, so set those on the deployment`,
      );
  }
}

/**
 * A pipeline or ensemble served by one actor: every model of the graph is a session in this
 * process, and a run walks the graph with the same executor the head uses, calling the sessions
 * in place. Each step then costs its inference and nothing else, where a graph run by the head
 * pays two process hops per step (head to actor and back, each waking a sleeping process); this
 * is how Triton's ensembles run, inside one server. The deployment is an ordinary model
 * deployment, so replicas, batching (of whole graph runs), GPUs, direct SDK calls and HTTP work
 * as for one model. The file is a graph document (`troupe deploy` format) whose model paths are
 * relative to the file's folder.
 *
 * @example
 * // models/chain.graph.json, deployed as { "name": "chain", "model": "chain.graph.json" }
 * { "graph": "chain", "nodes": [
 *   { "kind": "model", "name": "det", "model": "det.onnx" },
 *   { "kind": "model", "name": "cls", "model": "cls.onnx" },
 *   { "kind": "pipeline", "name": "chain", "steps": ["det", "cls"] } ] }
 */
export class GraphModel {
  readonly metadata: ModelMetadata;
  readonly provider: string;
  readonly batchable: boolean;
  readonly #plan: PlanNode;
  readonly #caller: StepCaller;

  private constructor(plan: PlanNode, models: Map<string, OnnxModel>, leaf: (name: string) => LeafInfo, metadata: ModelMetadata) {
    this.#plan = plan;
    this.metadata = metadata;
    this.provider = [...models.values()][0]!.provider;
    this.batchable = !concatsRows(plan, leaf);
    this.#caller = {
      call: async (name, inputs) => {
        const start = performance.now();
        const outputs = await models.get(name)!.run(mapFromWire(inputs, 'input'));
        return { outputs: mapToWire(outputs), queueMs: 0, computeMs: performance.now() - start };
      },
      leaf,
      replicas: () => 1,
    };
  }

  /** Reads and checks the graph file, then loads (and warms up) each model it calls. */
  static async load(path: string, options: LoadOptions): Promise<GraphModel> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw fail(path, `cannot read it: ${(err as Error).message}`);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw fail(path, `not valid JSON: ${(err as Error).message}`);
    }
    const parsed = GraphDocumentSchema.safeParse(raw);
    if (!parsed.success) throw fail(path, formatIssues(parsed.error.issues));
    checkServable(parsed.data, path);
    let root: PlanNode;
    try {
      root = compileGraph(parsed.data).root;
    } catch (err) {
      throw fail(path, (err as Error).message);
    }
    const files = new Map(
      parsed.data.nodes.flatMap((n) => (n.kind === 'model' && n.model !== undefined ? [[n.name, n.model] as const] : [])),
    );
    const models = new Map<string, OnnxModel>();
    try {
      for (const name of leavesOf(root)) {
        const file = await resolveModelPath(dirname(path), files.get(name)!, "the graph file's folder").catch((err: Error) => {
          throw fail(path, `model '${name}': ${err.message}`);
        });
        models.set(name, await OnnxModel.load(file, options));
      }
      const leaf = (name: string): LeafInfo => ({ kind: 'model', metadata: models.get(name)!.metadata });
      const signature = inferSignature(root, leaf);
      return new GraphModel(root, models, leaf, { inputs: signature.inputs ?? [], outputs: signature.outputs ?? [] });
    } catch (err) {
      // Sessions already loaded hold memory (GPU memory too) while the actor reports the failure.
      await Promise.allSettled([...models.values()].map((m) => m.release()));
      throw err instanceof TroupeError && err.code === 'TROUPE_ERR_MODEL_LOAD' ? err : fail(path, (err as Error).message);
    }
  }

  async run(inputs: Record<string, Tensor>, outputs?: readonly string[]): Promise<Record<string, Tensor>> {
    const all = await execute(this.#plan, mapToWire(inputs), this.#caller);
    const out: Record<string, Tensor> = {};
    for (const name of outputs?.length ? outputs : Object.keys(all)) {
      const w = Object.hasOwn(all, name) ? all[name] : undefined;
      if (!w)
        throw new TroupeError(
          'TROUPE_ERR_BAD_INPUT',
          `graph '${this.#plan.name}' has no output '${name}' (it gives ${Object.keys(all).join(', ')})`,
        );
      out[name] = fromWire(w, `output '${name}'`);
    }
    return out;
  }
}
