import { TroupeError } from '../errors.js';
import { MAX_GRAPH_STEPS, isLeaf } from './schema.js';
import type { Combine, GraphDocument, GraphNode, LeafNode, Wiring } from './schema.js';

/** A model or fn step: a call to the deployment of that name. */
export interface PlanDeploymentLeaf {
  kind: 'model' | 'fn';
  name: string;
}
/** A method step: a call of `method` on an instance of the class actor `actor`. */
export interface PlanMethod {
  kind: 'method';
  name: string;
  actor: string;
  method: string;
}
export type PlanLeaf = PlanDeploymentLeaf | PlanMethod;

/**
 * What a leaf calls, as the executor's caller looks it up: a deployment's name, or for a method
 * step `actor#method` ('#' is in no deployment name, so the two never meet).
 */
export function leafKey(leaf: PlanLeaf): string {
  return leaf.kind === 'method' ? `${leaf.actor}#${leaf.method}` : leaf.name;
}
export interface PlanPipeline {
  kind: 'pipeline';
  name: string;
  steps: PlanNode[];
  map: Wiring[];
}
export type PlanCombine = Exclude<Combine, { op: 'fn' }> | { op: 'fn'; fn: PlanDeploymentLeaf };
export interface PlanEnsemble {
  kind: 'ensemble';
  name: string;
  members: PlanNode[];
  combine: PlanCombine;
}
export interface PlanDataParallel {
  kind: 'dataParallel';
  name: string;
  step: PlanNode;
  chunk: number;
  parallel: number | undefined;
}
/** A graph with every name resolved to the node it means: what the executor walks. */
export type PlanNode = PlanLeaf | PlanPipeline | PlanEnsemble | PlanDataParallel;

export interface CompiledGraph {
  /** The node a run starts from. */
  root: PlanNode;
  /** Every composite node by name; each is runnable on its own once deployed. */
  composites: Map<string, Exclude<PlanNode, PlanLeaf>>;
  /** Leaves that carry a model path or fn reference: the deployments to create or update. */
  deployments: LeafNode[];
  /** Model and fn calls one run of the root expands to (data-parallel chunks not counted). */
  steps: number;
}

/** What a name already means on the head, for names the document does not define. */
export type Existing = (name: string) => 'model' | 'fn' | 'class' | 'graph' | undefined;

function bad(message: string): TroupeError {
  return new TroupeError('TROUPE_ERR_BAD_SPEC', message);
}

/**
 * Resolves a graph document into a plan and checks its structure: duplicate names, names that
 * mean nothing (neither a node of the document nor a deployment), cycles, wiring that names a
 * step the pipeline does not have, combine weights that do not match the members, and the size
 * limit. Types are checked later, once the models' metadata is known (see signature.ts).
 *
 * @example
 * const { root, deployments } = compileGraph(toGraphDocument(vote), (name) => (deployed.has(name) ? 'model' : undefined));
 */
export function compileGraph(doc: GraphDocument, deployed?: Existing): CompiledGraph {
  // Without `deployed` (a graph file served by one actor) the document is all there is.
  const existing: Existing = deployed ?? (() => undefined);
  const byName = new Map<string, GraphNode>();
  for (const node of doc.nodes) {
    if (byName.has(node.name)) throw bad(`node '${node.name}' is defined twice`);
    byName.set(node.name, node);
    const already = existing(node.name);
    if (!isLeaf(node) && (already === 'model' || already === 'fn' || already === 'class')) {
      throw bad(`${node.kind} '${node.name}' has the name of a deployed ${already}; graph and deployment names must differ`);
    }
    if (isLeaf(node) && already === 'graph') throw bad(`${node.kind} '${node.name}' has the name of a deployed graph`);
    if (isLeaf(node) && already === 'class') throw bad(`${node.kind} '${node.name}' has the name of a deployed class actor`);
  }
  if (!byName.has(doc.graph)) throw bad(`graph '${doc.graph}' names no node of the document`);

  const plans = new Map<string, PlanNode>();
  const stack: string[] = [];
  const resolve = (name: string, parent: GraphNode | undefined): PlanNode => {
    const done = plans.get(name);
    if (done) return done;
    if (stack.includes(name)) throw bad(`graph has a cycle: ${[...stack.slice(stack.indexOf(name)), name].join(' > ')}`);
    const node = byName.get(name);
    if (!node) {
      const kind = existing(name);
      const where = parent ? `${parent.kind} '${parent.name}' names '${name}'` : `'${name}'`;
      if (kind === 'model' || kind === 'fn') return remember({ kind, name });
      if (kind === 'graph') throw bad(`${where}, a graph deployed separately; put its nodes in this document instead`);
      if (kind === 'class') throw bad(`${where}, a class actor: its methods take values, not tensors, so it is no graph step`);
      throw bad(
        deployed
          ? `${where}, which is neither a node of this graph nor a deployed model or fn`
          : `${where}, which is not a node of this graph`,
      );
    }
    stack.push(name);
    const plan = build(node);
    stack.pop();
    return remember(plan);
  };
  const remember = (plan: PlanNode): PlanNode => (plans.set(plan.name, plan), plan);

  const build = (node: GraphNode): PlanNode => {
    switch (node.kind) {
      case 'model':
      case 'fn': {
        const has = node.kind === 'model' ? node.model : node.fn;
        if (has === undefined && existing(node.name) !== node.kind) {
          throw bad(
            `${node.kind} '${node.name}' has no ${node.kind === 'model' ? 'model path' : 'fn reference'} and no ${node.kind} of that name is deployed`,
          );
        }
        const options = Object.keys(node).filter((k) => !['kind', 'name', 'model', 'fn'].includes(k));
        if (has === undefined && options.length > 0) {
          throw bad(
            `${node.kind} '${node.name}' names an existing deployment (it has no ${node.kind === 'model' ? 'model path' : 'fn reference'}), so it takes no deployment options (${options.join(', ')})`,
          );
        }
        return { kind: node.kind, name: node.name };
      }
      case 'method':
        if (existing(node.actor) !== 'class')
          throw bad(`method step '${node.name}' calls '${node.actor}.${node.method}()', but '${node.actor}' is not a deployed class actor`);
        return { kind: 'method', name: node.name, actor: node.actor, method: node.method };
      case 'pipeline': {
        for (const w of node.map ?? []) {
          if (w.step !== undefined && !node.steps.includes(w.step))
            throw bad(`pipeline '${node.name}' maps '${w.from}' to '${w.to}' of step '${w.step}', which is not one of its steps`);
        }
        return { kind: 'pipeline', name: node.name, steps: node.steps.map((s) => resolve(s, node)), map: node.map ?? [] };
      }
      case 'ensemble': {
        const dup = node.members.find((m, i) => node.members.indexOf(m) !== i);
        if (dup) throw bad(`ensemble '${node.name}' lists member '${dup}' twice`);
        const c = node.combine;
        if (c.op === 'mean' && c.weights) {
          if (c.weights.length !== node.members.length)
            throw bad(`ensemble '${node.name}' has ${node.members.length} members but ${c.weights.length} weights`);
          if (!c.weights.some((w) => w > 0)) throw bad(`ensemble '${node.name}': weights must not all be 0`);
        }
        const members = node.members.map((m) => resolve(m, node));
        if (c.op !== 'fn') return { kind: 'ensemble', name: node.name, members, combine: c };
        const combiner = resolve(c.fn, node);
        if (combiner.kind !== 'fn') throw bad(`ensemble '${node.name}' combines with '${c.fn}', which is a ${combiner.kind}, not a fn`);
        return { kind: 'ensemble', name: node.name, members, combine: { op: 'fn', fn: combiner } };
      }
      case 'dataParallel':
        return { kind: 'dataParallel', name: node.name, step: resolve(node.step, node), chunk: node.chunk, parallel: node.parallel };
    }
  };

  const root = resolve(doc.graph, undefined);
  if (root.kind === 'method') throw bad(`graph '${doc.graph}' is a single method step; put it in a pipeline (with models or other steps)`);
  // Nodes the root does not reach are still resolved: a mistake in them is a mistake in the file.
  for (const node of doc.nodes) resolve(node.name, undefined);

  const steps = countSteps(root);
  if (steps > MAX_GRAPH_STEPS)
    throw bad(`graph '${doc.graph}' expands to ${steps} model and fn calls per run; the limit is ${MAX_GRAPH_STEPS}`);

  const composites = new Map<string, Exclude<PlanNode, PlanLeaf>>();
  for (const plan of plans.values()) {
    if (plan.kind === 'pipeline' || plan.kind === 'ensemble' || plan.kind === 'dataParallel') composites.set(plan.name, plan);
  }
  const deployments = doc.nodes.filter(
    (n): n is LeafNode => (n.kind === 'model' && n.model !== undefined) || (n.kind === 'fn' && n.fn !== undefined),
  );
  return { root, composites, deployments, steps };
}

/** Model and fn calls one run expands to; shared sub-graphs count once per use. */
export function countSteps(plan: PlanNode): number {
  const memo = new Map<PlanNode, number>();
  const count = (p: PlanNode): number => {
    const known = memo.get(p);
    if (known !== undefined) return known;
    let n: number;
    switch (p.kind) {
      case 'model':
      case 'fn':
      case 'method':
        n = 1;
        break;
      case 'pipeline':
        n = p.steps.reduce((sum, s) => sum + count(s), 0);
        break;
      case 'ensemble':
        n = p.members.reduce((sum, m) => sum + count(m), 0) + (p.combine.op === 'fn' ? 1 : 0);
        break;
      case 'dataParallel':
        n = count(p.step);
        break;
    }
    memo.set(p, n);
    return n;
  };
  return count(plan);
}

/** The model and fn deployments a plan calls (a combine fn included), each once. */
export function leavesOf(plan: PlanNode, into = new Set<string>()): Set<string> {
  switch (plan.kind) {
    case 'model':
    case 'fn':
      into.add(plan.name);
      break;
    case 'method':
      into.add(plan.actor);
      break;
    case 'pipeline':
      for (const s of plan.steps) leavesOf(s, into);
      break;
    case 'ensemble':
      for (const m of plan.members) leavesOf(m, into);
      if (plan.combine.op === 'fn') into.add(plan.combine.fn.name);
      break;
    case 'dataParallel':
      leavesOf(plan.step, into);
      break;
  }
  return into;
}
