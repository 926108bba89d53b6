import type * as z from 'zod';
import { TroupeError } from '../errors.js';
import type { ModelDeploymentInput } from '../spec.js';
import { formatIssues } from './issues.js';
import {
  DataParallelNodeSchema,
  EnsembleNodeSchema,
  FnNodeSchema,
  MethodNodeSchema,
  ModelNodeSchema,
  PipelineNodeSchema,
} from './schema.js';
import type { Combine, GraphDocument, GraphNode, Wiring } from './schema.js';

const STEP = Symbol.for('troupe.graph.step');

/**
 * One node of a graph as the builder hands it out. Composite steps hold their children, so a
 * graph is built bottom-up from values and can never contain a cycle; `toJSON()` (and
 * `JSON.stringify`) give the graph's one JSON form with this step as the node to run.
 */
export interface GraphStep {
  readonly [STEP]: true;
  readonly kind: GraphNode['kind'];
  readonly name: string;
  /** This node in the JSON form: composite nodes name their children. */
  readonly node: GraphNode;
  readonly children: readonly GraphStep[];
  toJSON(): GraphDocument;
}

export function isGraphStep(value: unknown): value is GraphStep {
  return typeof value === 'object' && value !== null && (value as { [STEP]?: unknown })[STEP] === true;
}

function make(node: GraphNode, children: GraphStep[]): GraphStep {
  const step: GraphStep = {
    [STEP]: true,
    kind: node.kind,
    name: node.name,
    node,
    children,
    toJSON: () => toGraphDocument(step),
  };
  return Object.freeze(step);
}

// Builder calls validate at once, so a typo fails where it was written, not at deploy time.
function check<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${what}: ${formatIssues(parsed.error.issues)}`);
  return parsed.data;
}

/** Deployment options of a model step: `path` plus any field of a model deployment spec. */
export type ModelStepOptions = { path?: string } & Omit<ModelDeploymentInput, 'name' | 'model' | 'kind'>;

/**
 * A model step. Deploying a graph that holds it deploys the model too (or updates it).
 *
 * @example
 * const det = model('det', { path: 'det.onnx', gpus: 1, replicas: 2 });
 * const existing = model('mlp'); // a deployment made earlier
 */
export function model(name: string, options: ModelStepOptions = {}): GraphStep {
  const { path, ...rest } = options;
  const node = check(ModelNodeSchema, { kind: 'model', name, ...(path !== undefined ? { model: path } : {}), ...rest }, `model '${name}'`);
  return make(node, []);
}

/** Deployment options of a fn step (`replicas`, `cpus`, `maxQueue`). */
export type FnStepOptions = Pick<ModelDeploymentInput, 'replicas' | 'cpus' | 'maxQueue'>;

/**
 * A function step `(inputs) => outputs`, exported by a module that exists on the agents
 * (resolved inside each agent's `--module-dir`), run in its own actor process.
 *
 * @example
 * const prep = fn('prep', 'examples/ocr/steps.js#prepare');
 */
export function fn(name: string, ref?: string, options: FnStepOptions = {}): GraphStep {
  const node = check(FnNodeSchema, { kind: 'fn', name, ...(ref !== undefined ? { fn: ref } : {}), ...options }, `fn '${name}'`);
  return make(node, []);
}

/**
 * A method of a class actor deployed earlier (`cluster.actor`) as a step: the step's tensors go to
 * the least busy instance as the method's one argument (`{ name: Tensor }`), and the method returns
 * tensors the same way. Several steps may call methods of one actor (tokenize, then decode).
 *
 * @example
 * const tokenize = method('tokenize', 'tok', 'encode');
 * const decode = method('decode', 'tok', 'decode');
 * await cluster.deploy(pipeline('chat', [tokenize, model('lm'), decode]));
 */
export function method(name: string, actor: string, methodName: string): GraphStep {
  const node = check(MethodNodeSchema, { kind: 'method', name, actor, method: methodName }, `method '${name}'`);
  return make(node, []);
}

const NOT_A_STEP = 'is not a step (make one with model(), fn(), pipeline(), ensemble() or dataParallel())';

/**
 * Refuses what is not an array of steps (made by model(), fn(), pipeline(), ...) as a bad spec
 * naming where: from JavaScript anything may be passed, and `.map` on it threw a bare TypeError.
 */
function stepsOf(what: string, field: string, steps: unknown): void {
  if (!Array.isArray(steps)) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${what}: ${field} must be an array of steps`);
  steps.forEach((step, i) => {
    if (!isGraphStep(step)) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${what}: ${field}[${i}] ${NOT_A_STEP}`);
  });
}

export interface PipelineOptions {
  /** Explicit wiring where names differ, e.g. `[{ step: 'rec', from: 'probs', to: 'x' }]`. */
  map?: Wiring[];
}

/**
 * Steps run one after another. A step's inputs come from the step before it by name, else
 * positionally (one output into one input), else from `map`, else from any earlier value of that
 * name (the pipeline's inputs included).
 *
 * @example
 * const ocr = pipeline('ocr', [prep, det, crop, rec]);
 */
export function pipeline(name: string, steps: readonly GraphStep[], options: PipelineOptions = {}): GraphStep {
  stepsOf(`pipeline '${name}'`, 'steps', steps);
  const node = check(
    PipelineNodeSchema,
    { kind: 'pipeline', name, steps: steps.map((s) => s.name), ...(options.map ? { map: options.map } : {}) },
    `pipeline '${name}'`,
  );
  return make(node, [...steps]);
}

/** A built-in combiner, or a fn step that receives every member output as `<member>/<output>`. */
export type CombineOption = 'mean' | 'max' | 'vote' | { mean: number[] } | { concat: number } | GraphStep;

export interface EnsembleOptions {
  combine: CombineOption;
}

function toCombine(option: CombineOption, name: string): { combine: Combine; extra: GraphStep[] } {
  if (option === 'mean' || option === 'max' || option === 'vote') return { combine: { op: option }, extra: [] };
  if (isGraphStep(option)) {
    if (option.kind !== 'fn')
      throw new TroupeError('TROUPE_ERR_BAD_SPEC', `ensemble '${name}': combine must be a fn step, got ${option.kind} '${option.name}'`);
    return { combine: { op: 'fn', fn: option.name }, extra: [option] };
  }
  // From JavaScript anything may come: `in` on a string or a number would throw a TypeError of its own.
  if (typeof option === 'object' && option !== null) {
    if ('mean' in option) return { combine: { op: 'mean', weights: option.mean }, extra: [] };
    if ('concat' in option) return { combine: { op: 'concat', axis: option.concat }, extra: [] };
  }
  throw new TroupeError('TROUPE_ERR_BAD_SPEC', `ensemble '${name}': unknown combine option ${JSON.stringify(option)}`);
}

/**
 * Every member gets the same inputs at once; their outputs are combined.
 *
 * @example
 * const vote = ensemble('vote', [a, b, c], { combine: 'vote' });
 * const blend = ensemble('blend', [a, b], { combine: { mean: [0.7, 0.3] } });
 */
export function ensemble(name: string, members: readonly GraphStep[], options: EnsembleOptions): GraphStep {
  stepsOf(`ensemble '${name}'`, 'members', members);
  if (typeof options !== 'object' || options === null)
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `ensemble '${name}': options must be an object with a combine option`);
  const { combine, extra } = toCombine(options.combine, name);
  const node = check(EnsembleNodeSchema, { kind: 'ensemble', name, members: members.map((m) => m.name), combine }, `ensemble '${name}'`);
  return make(node, [...members, ...extra]);
}

export interface DataParallelOptions {
  /** Rows per chunk along axis 0. */
  chunk: number;
  /** Chunks in flight at once. */
  parallel?: number;
}

/**
 * Cuts the batch axis of every input into chunks, runs them on the step's replicas in parallel
 * and concatenates the outputs in the original order.
 *
 * @example
 * const bulk = dataParallel('bulk', model('mlp', { path: 'mlp.onnx', replicas: 4 }), { chunk: 256 });
 */
export function dataParallel(name: string, step: GraphStep, options: DataParallelOptions): GraphStep {
  if (!isGraphStep(step)) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `dataParallel '${name}': ${NOT_A_STEP}`);
  const node = check(DataParallelNodeSchema, { kind: 'dataParallel', name, step: step.name, ...options }, `dataParallel '${name}'`);
  return make(node, [step]);
}

/**
 * The JSON form of the graph rooted at `root`: every node reachable from it, children first.
 * Two different nodes under one name are refused (names are how nodes refer to each other).
 */
export function toGraphDocument(root: GraphStep): GraphDocument {
  const nodes = new Map<string, { node: GraphNode; text: string }>();
  const visit = (step: GraphStep) => {
    const text = JSON.stringify(step.node);
    const seen = nodes.get(step.name);
    if (seen) {
      if (seen.text !== text)
        throw new TroupeError('TROUPE_ERR_BAD_SPEC', `two different steps are named '${step.name}': ${seen.text} and ${text}`);
      return;
    }
    for (const child of step.children) visit(child);
    nodes.set(step.name, { node: step.node, text });
  };
  visit(root);
  return { graph: root.name, nodes: [...nodes.values()].map((n) => n.node) };
}
