import type { PlanNode } from '../../runtime/internal.js';
import type { Dag, DagGroup, DagNode } from './client/protocol.js';

interface Ends {
  sources: string[];
  sinks: string[];
}

function combineLabel(plan: Extract<PlanNode, { kind: 'ensemble' }>): string {
  const c = plan.combine;
  switch (c.op) {
    case 'mean':
      return c.weights ? `weighted mean (${c.weights.join(', ')})` : 'mean';
    case 'concat':
      return `concat (axis ${c.axis})`;
    case 'fn':
      return c.fn.name;
    default:
      return c.op;
  }
}

/**
 * Flattens a graph's plan into boxes and arrows for the status page: model and fn steps are
 * boxes that name their deployment; an ensemble fans out to its members and back into its
 * combine step; a data-parallel step sits between a split and a concat; every named sub-graph
 * other than the root becomes a group box around its steps. A step used twice is drawn twice,
 * since each use is a call of its own.
 *
 * @example
 * graphDag(plan) // { nodes: [{ id: 'in', kind: 'input', ... }, ...], groups: [...], edges: [{ from, to }, ...] }
 */
export function graphDag(root: PlanNode): Dag {
  const nodes: DagNode[] = [];
  const groups: DagGroup[] = [];
  const edges: { from: string; to: string }[] = [];
  let next = 0;

  const add = (kind: DagNode['kind'], label: string, group: string | undefined, deployment?: string): string => {
    const id = `n${next++}`;
    nodes.push({ id, kind, label, ...(deployment !== undefined ? { deployment } : {}), ...(group !== undefined ? { group } : {}) });
    return id;
  };
  const link = (from: string[], to: string[]) => {
    for (const f of from) for (const t of to) edges.push({ from: f, to: t });
  };

  const build = (plan: PlanNode, parent: string | undefined, isRoot: boolean): Ends => {
    if (plan.kind === 'model' || plan.kind === 'fn') {
      const id = add(plan.kind, plan.name, parent, plan.name);
      return { sources: [id], sinks: [id] };
    }
    if (plan.kind === 'method') {
      // Drawn as a fn box naming the call, tied to the actor's deployment (its instances' states colour it).
      const id = add('fn', `${plan.name}: ${plan.actor}.${plan.method}()`, parent, plan.actor);
      return { sources: [id], sinks: [id] };
    }
    let group = parent;
    if (!isRoot) {
      group = `g${next++}`;
      groups.push({ id: group, label: `${plan.kind} ${plan.name}`, ...(parent !== undefined ? { group: parent } : {}) });
    }
    switch (plan.kind) {
      case 'pipeline': {
        const parts = plan.steps.map((s) => build(s, group, false));
        for (let i = 1; i < parts.length; i++) link(parts[i - 1]!.sinks, parts[i]!.sources);
        return { sources: parts[0]?.sources ?? [], sinks: parts.at(-1)?.sinks ?? [] };
      }
      case 'ensemble': {
        const members = plan.members.map((m) => build(m, group, false));
        const combine =
          plan.combine.op === 'fn'
            ? add('fn', plan.combine.fn.name, group, plan.combine.fn.name)
            : add('combine', combineLabel(plan), group);
        for (const m of members) link(m.sinks, [combine]);
        return { sources: members.flatMap((m) => m.sources), sinks: [combine] };
      }
      case 'dataParallel': {
        const split = add('split', `split: ${plan.chunk} row${plan.chunk === 1 ? '' : 's'} a chunk`, group);
        const inner = build(plan.step, group, false);
        const merge = add('merge', 'concat chunks', group);
        link([split], inner.sources);
        link(inner.sinks, [merge]);
        return { sources: [split], sinks: [merge] };
      }
    }
  };

  const input = add('input', 'inputs', undefined);
  const ends = build(root, undefined, true);
  const output = add('output', 'outputs', undefined);
  link([input], ends.sources);
  link(ends.sinks, [output]);
  return { nodes, groups, edges };
}
