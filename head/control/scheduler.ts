import { MILLI_PER_UNIT, fromMilli, maxActorsOf, plural, toMilli } from '../../runtime/internal.js';
import type { ActorRecord, NodeRecord } from '../state/records.js';
import { ActorsByNode } from './actors-by-node.js';
import { usageOn } from './usage.js';
import type { NodeUsage } from './usage.js';

export type { NodeUsage };

export interface ResourceRequest {
  cpus: number;
  /** 0, a fraction of one GPU, or a whole number of GPUs. */
  gpus: number;
  /** Host memory, in bytes (0: not accounted). */
  memoryBytes?: number;
}

export type Strategy = 'spread' | 'pack';

export type Placement = { ok: true; node: NodeRecord; gpus: number[]; gpuShare: number } | { ok: false; reason: string };

/**
 * Nodes a refusal names one by one. Every PENDING actor carries its reason into describe, the status
 * page and deploy errors: at 3,000 nodes, naming them all made each reason about 150 KB.
 */
export const REASON_NODES = 20;

const mib = (bytes: number) => Math.max(0, Math.round(bytes / 2 ** 20));

/** What the node's actors (among `actors`) use, and how many replicas of `deployment` it holds. */
export function usageOf(node: NodeRecord, actors: Iterable<ActorRecord>, deployment: string): NodeUsage {
  return usageOn(node.id, actors, deployment);
}

/** GPUs chosen on one node, with what the strategies compare between nodes. */
interface GpuChoice {
  indices: number[];
  /** Replicas of the same deployment already on the chosen GPUs: spread wants 0. */
  shared: number;
  /** What the chosen GPUs have free before this actor, in thousandths of a GPU: pack wants the least. */
  free: number;
}

/**
 * Picks GPUs on one node, or null when none fit. Whole GPUs take devices nobody holds. A fraction
 * goes, under `spread`, to a GPU holding the fewest replicas of the same deployment (so replicas
 * share a device only once every fitting one holds one); under `pack`, and among equals for
 * `spread`, to the fullest GPU that still fits, keeping whole devices free for actors that need one.
 */
function pickGpus(node: NodeRecord, usage: NodeUsage, gpus: number, strategy: Strategy): GpuChoice | null {
  const all = node.resources.gpus.map((g) => ({
    index: g.index,
    free: MILLI_PER_UNIT - (usage.gpuUsedMilli.get(g.index) ?? 0),
    shared: usage.sameDeploymentOnGpu.get(g.index) ?? 0,
  }));
  if (gpus < 1) {
    const fits = all
      .filter((g) => g.free >= toMilli(gpus))
      .sort((a, b) => (strategy === 'spread' ? a.shared - b.shared : 0) || a.free - b.free || a.index - b.index);
    const best = fits[0];
    return best ? { indices: [best.index], shared: best.shared, free: best.free } : null;
  }
  const whole = all.filter((g) => g.free === MILLI_PER_UNIT).slice(0, gpus);
  return whole.length >= gpus ? { indices: whole.map((g) => g.index), shared: 0, free: whole.length * MILLI_PER_UNIT } : null;
}

/** The node's actor cap is reached: a process more would exceed what its --max-actors allows. */
function atActorCap(node: NodeRecord, usage: NodeUsage): boolean {
  return usage.actors >= maxActorsOf(node.resources);
}

function describeShortage(node: NodeRecord, usage: NodeUsage, req: ResourceRequest): string {
  // First what no wait can change: a node without GPUs never takes a GPU actor, however many CPUs free up.
  if (req.gpus > 0 && node.resources.gpus.length === 0) return `${node.name} has no GPU`;
  if (atActorCap(node, usage)) return `node ${node.name} holds its ${plural(maxActorsOf(node.resources), 'actor')} (--max-actors)`;
  const cpusFree = toMilli(node.resources.cpus) - usage.cpusUsedMilli;
  if (cpusFree < toMilli(req.cpus)) return `${node.name} has ${fromMilli(cpusFree)} of ${node.resources.cpus} CPUs free`;
  const memFree = node.resources.memoryBytes - usage.memoryUsed;
  if (memFree < (req.memoryBytes ?? 0)) {
    return `${node.name} has ${mib(memFree)} MiB of ${mib(node.resources.memoryBytes)} MiB memory free, a replica reserves ${mib(req.memoryBytes ?? 0)} MiB`;
  }
  const holders = [...new Set([...usage.gpuHolders.values()].flat())];
  const freeWhole = node.resources.gpus.filter((g) => (usage.gpuUsedMilli.get(g.index) ?? 0) === 0).length;
  const held = holders.length > 0 ? ` (held by ${holders.join(', ')})` : '';
  return `${node.name} has ${freeWhole} of ${node.resources.gpus.length} GPUs free${held}`;
}

interface Candidate {
  node: NodeRecord;
  gpus: GpuChoice | null;
  usage: NodeUsage;
}

/** The node as a candidate for `req`, or null when it lacks something the actor needs. */
function candidateOf(node: NodeRecord, usage: NodeUsage, req: ResourceRequest, strategy: Strategy): Candidate | null {
  const cpusOk =
    !atActorCap(node, usage) &&
    toMilli(node.resources.cpus) - usage.cpusUsedMilli >= toMilli(req.cpus) &&
    node.resources.memoryBytes - usage.memoryUsed >= (req.memoryBytes ?? 0);
  if (!cpusOk) return null;
  const gpus = req.gpus > 0 ? pickGpus(node, usage, req.gpus, strategy) : null;
  return req.gpus === 0 || gpus ? { node, gpus, usage } : null;
}

const load = (c: Candidate) => c.usage.cpusUsedMilli / toMilli(c.node.resources.cpus);
const shared = (c: Candidate) => c.gpus?.shared ?? 0;
const gpuFree = (c: Candidate) => c.gpus?.free ?? 0;
/** Node names break ties, so the choice does not depend on the order nodes joined in. */
const byName = (a: Candidate, b: Candidate) => a.node.name.localeCompare(b.node.name);
const spreadOrder = (a: Candidate, b: Candidate) =>
  a.usage.sameDeployment - b.usage.sameDeployment || shared(a) - shared(b) || load(a) - load(b) || byName(a, b);
const packOrder = (a: Candidate, b: Candidate) => gpuFree(a) - gpuFree(b) || load(b) - load(a) || byName(a, b);

/**
 * Places one actor. `spread` (the default) puts replicas of one deployment on different nodes
 * first (the node with the fewest of them), then on different GPUs of a node (see pickGpus), and
 * only then lets two share a GPU; among equals the least loaded node wins. `pack` is the
 * opposite: the fullest GPU and the busiest node that fit, keeping whole nodes and devices free
 * for large actors. A failure says, node by node, what is missing. `actors` may be grouped by node
 * already (a scheduling pass places many actors against one ActorsByNode, over the same `nodes`,
 * which must then be iterable more than once: an array, not an iterator).
 */
export function place(
  req: ResourceRequest,
  deployment: string,
  nodes: Iterable<NodeRecord>,
  actors: Iterable<ActorRecord> | ActorsByNode,
  strategy: Strategy = 'spread',
): Placement {
  // Grouped by node once: each node's usage then reads only its own actors.
  const byNode = actors instanceof ActorsByNode ? actors : new ActorsByNode(actors);
  // Everything a node's verdict depends on besides its actors (see ActorsByNode.best).
  const request = `${deployment}\0${strategy}\0${req.cpus}\0${req.gpus}\0${req.memoryBytes ?? 0}`;
  const best = byNode.best(
    request,
    nodes,
    (node) => candidateOf(node, usageOn(node.id, byNode.on(node.id), deployment), req, strategy),
    strategy === 'spread' ? spreadOrder : packOrder,
  );
  if (best) return { ok: true, node: best.node, gpus: best.gpus?.indices ?? [], gpuShare: req.gpus > 0 && req.gpus < 1 ? req.gpus : 1 };
  // Said node by node only when nothing fits: the text is the costly part at thousands of nodes.
  const needs = `needs ${req.gpus > 0 ? `${req.gpus} GPU${req.gpus === 1 ? '' : 's'} and ` : ''}${req.cpus} CPU${req.cpus === 1 ? '' : 's'}`;
  const alive = [...nodes].filter((n) => n.state === 'ALIVE');
  if (alive.length === 0) return { ok: false, reason: `${needs}; no node is alive` };
  const named = alive.slice(0, REASON_NODES);
  const shortages = named.map((node) => describeShortage(node, usageOn(node.id, byNode.on(node.id), deployment), req));
  const more = alive.length - named.length;
  if (more > 0) shortages.push(`and ${more} more node${more === 1 ? '' : 's'} short of it`);
  return { ok: false, reason: `${needs}; ${shortages.join('; ')}` };
}
