import * as z from 'zod';
import { NameSchema } from '../protocol/common.js';
import { MethodNameSchema } from '../protocol/class-actor.js';

/**
 * The one JSON form of a graph. A document is a flat list of named nodes plus the name of the
 * node to run; composite nodes (pipeline, ensemble, dataParallel) name their children, so any of
 * them nests, a node can be shared, and the form is the same whether the SDK built it or a person
 * wrote it in a file. A flat list (not a tree) is what makes references, and so cycles, possible
 * at all: deploy refuses those, and names the nodes on the cycle.
 *
 * @example
 * {
 *   "graph": "vote",
 *   "nodes": [
 *     { "kind": "model", "name": "a", "model": "a.onnx", "replicas": 2 },
 *     { "kind": "model", "name": "b", "model": "b.onnx" },
 *     { "kind": "ensemble", "name": "vote", "members": ["a", "b"], "combine": { "op": "mean" } }
 *   ]
 * }
 */

/** Nodes one document may define; a graph past this is refused with TROUPE_ERR_BAD_SPEC. */
export const MAX_GRAPH_NODES = 256;
/** Model and fn calls one run of a graph may expand to (data-parallel chunks not counted). */
export const MAX_GRAPH_STEPS = 1024;

const TensorNameSchema = z.string().min(1).max(256);

/** `path#export`: a module under the agent's `--module-dir` and the function it exports. */
export const FnRefSchema = z
  .string()
  .max(1024)
  .regex(/^[^#\s][^#]*#[A-Za-z_$][A-Za-z0-9_$]*$/, "fn references are 'path/to/module.js#exportName'");

/**
 * A model step. With `model` (a path under the agent's model directory) deploying the graph
 * deploys the model too, and every other field is a deployment option (`replicas`, `gpus`,
 * `batch`, ... as in a model deployment spec, checked at deploy). Without `model` it names a
 * deployment that already exists.
 */
export const ModelNodeSchema = z
  .object({
    kind: z.literal('model'),
    name: NameSchema,
    model: z.string().min(1).max(1024).optional(),
  })
  .catchall(z.unknown());
export type ModelNode = z.infer<typeof ModelNodeSchema>;

/**
 * A function step, run in its own actor process. `fn` is `path#export` under the agents'
 * `--module-dir`; other fields are deployment options (`replicas`, `cpus`, `maxQueue`). Without
 * `fn` it names a fn deployment that already exists.
 */
export const FnNodeSchema = z
  .object({
    kind: z.literal('fn'),
    name: NameSchema,
    fn: FnRefSchema.optional(),
  })
  .catchall(z.unknown());
export type FnNode = z.infer<typeof FnNodeSchema>;

/**
 * A method of a class actor as a step ([docs/actors.md](../../docs/actors.md)): `actor` names a
 * deployed class actor, `method` the method that takes the step's tensors (`{ name: Tensor }`)
 * and returns tensors, run on the least busy instance. The step deploys nothing; the class may
 * declare the method's signature (`static signatures = { method: { inputs, outputs } }`), and the
 * graph is then type-checked around it as around a model.
 */
export const MethodNodeSchema = z
  .object({
    kind: z.literal('method'),
    name: NameSchema,
    actor: NameSchema,
    method: MethodNameSchema,
  })
  .strict();
export type MethodNode = z.infer<typeof MethodNodeSchema>;

/** Feeds tensor `from` into input `to` of step `step` (of every step, when absent). */
export const WiringSchema = z.object({ step: NameSchema.optional(), from: TensorNameSchema, to: TensorNameSchema }).strict();
export type Wiring = z.infer<typeof WiringSchema>;

export const PipelineNodeSchema = z
  .object({
    kind: z.literal('pipeline'),
    name: NameSchema,
    steps: z.array(NameSchema).min(1).max(MAX_GRAPH_NODES),
    map: z.array(WiringSchema).max(1024).optional(),
  })
  .strict();
export type PipelineNode = z.infer<typeof PipelineNodeSchema>;

/** How an ensemble's member outputs become one answer. */
export const CombineSchema = z.discriminatedUnion('op', [
  /** Element-wise mean; with `weights` (one per member) a weighted mean. */
  z.object({ op: z.literal('mean'), weights: z.array(z.number().nonnegative().finite()).max(64).optional() }).strict(),
  /** Element-wise maximum. */
  z.object({ op: z.literal('max') }).strict(),
  /** Majority vote over each member's argmax along the last axis; ties go to the lower class. */
  z.object({ op: z.literal('vote') }).strict(),
  /** Concatenation along `axis` (negative counts from the end), in member order. */
  z.object({ op: z.literal('concat'), axis: z.number().int().min(-16).max(15) }).strict(),
  /** A fn step that receives every member output as `<member>/<output>`. */
  z.object({ op: z.literal('fn'), fn: NameSchema }).strict(),
]);
export type Combine = z.infer<typeof CombineSchema>;

export const EnsembleNodeSchema = z
  .object({
    kind: z.literal('ensemble'),
    name: NameSchema,
    members: z.array(NameSchema).min(1).max(64),
    combine: CombineSchema,
  })
  .strict();
export type EnsembleNode = z.infer<typeof EnsembleNodeSchema>;

export const DataParallelNodeSchema = z
  .object({
    kind: z.literal('dataParallel'),
    name: NameSchema,
    /** The step every chunk runs (usually a model with several replicas). */
    step: NameSchema,
    /** Rows per chunk along axis 0; the last chunk holds what is left. */
    chunk: z
      .number()
      .int()
      .min(1)
      .max(1 << 24),
    /** Chunks in flight at once (default: twice the READY replicas of a model step, else 8). */
    parallel: z.number().int().min(1).max(1024).optional(),
  })
  .strict();
export type DataParallelNode = z.infer<typeof DataParallelNodeSchema>;

export const GraphNodeSchema = z.discriminatedUnion('kind', [
  ModelNodeSchema,
  FnNodeSchema,
  MethodNodeSchema,
  PipelineNodeSchema,
  EnsembleNodeSchema,
  DataParallelNodeSchema,
]);
export type GraphNode = z.infer<typeof GraphNodeSchema>;
export type LeafNode = ModelNode | FnNode;
export type CompositeNode = PipelineNode | EnsembleNode | DataParallelNode;

export const GraphDocumentSchema = z
  .object({
    /** The node a run of this graph starts from. */
    graph: NameSchema,
    nodes: z.array(GraphNodeSchema).min(1).max(MAX_GRAPH_NODES),
  })
  .strict();
export type GraphDocument = z.infer<typeof GraphDocumentSchema>;

/** True for a value shaped like a graph document (as opposed to a single model spec). */
export function looksLikeGraphDocument(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'graph' in value && 'nodes' in value;
}

export function isLeaf(node: GraphNode): node is LeafNode {
  return node.kind === 'model' || node.kind === 'fn';
}

/** The names a node refers to, in order (steps, members, the combine fn, the data-parallel step). */
export function childNames(node: GraphNode): string[] {
  switch (node.kind) {
    case 'pipeline':
      return node.steps;
    case 'ensemble':
      return node.combine.op === 'fn' ? [...node.members, node.combine.fn] : node.members;
    case 'dataParallel':
      return [node.step];
    default:
      return [];
  }
}
