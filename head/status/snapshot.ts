import type { GraphView, PlanNode } from '../../runtime/internal.js';
import { headLoopDelay } from '../state/event-loop.js';
import { readinessBody, serverReadiness } from '../control/readiness.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ActorRecord, NodeRecord } from '../state/records.js';
import type { StatusActor, StatusDeployment, StatusGpu, StatusGraph, StatusNode, StatusSnapshot } from './client/protocol.js';
import { graphDag } from './dag.js';
import type { EventFeed } from './event-feed.js';
import { gpuSubject, seriesId } from './sampler.js';
import type { ClusterSampler } from './sampler.js';

/** The graphs the head has registered (head/graph's RunGateway). */
export interface GraphSource {
  views(): GraphView[];
  plan(name: string): PlanNode | undefined;
}

/** A snapshot without what the stream adds per page (only the series samples and events it lacks). */
export type SnapshotBase = Omit<StatusSnapshot, 'full' | 'series' | 'events' | 'historySeconds'>;

/** Seconds the table figures (req/s, mean batch) average over, so they do not jump every second. */
const SMOOTHING_SAMPLES = 5;

/** Actors that hold resources on their node (the scheduler's own rule). */
const holdsResources = (a: ActorRecord): boolean => a.nodeId !== null && a.state !== 'DEAD' && a.state !== 'PENDING';

function nodeOf(n: NodeRecord, actors: ActorRecord[], gpuUtil: (node: string, index: number) => number | null): StatusNode {
  const placed = actors.filter((a) => a.nodeId === n.id && holdsResources(a));
  const gpus = n.resources.gpus.map((g): StatusGpu => {
    const holders = placed
      .filter((a) => a.gpus.includes(g.index))
      .map((a) => ({ actor: a.name, deployment: a.deployment, state: a.state, share: a.gpuShare, memoryMiB: a.gpuMemoryMiB }));
    return {
      index: g.index,
      name: g.name,
      simulated: g.simulated,
      memoryTotalMiB: g.memoryTotalMiB,
      memoryUsedMiB: g.simulated ? null : g.memoryUsedMiB,
      utilizationPct: g.simulated ? gpuUtil(n.name, g.index) : g.utilizationPct,
      allocated: holders.reduce((sum, h) => sum + h.share, 0),
      holders,
    };
  });
  return {
    id: n.id,
    name: n.name,
    state: n.state,
    address: n.address,
    cpus: n.resources.cpus,
    cpusAllocated: placed.reduce((sum, a) => sum + a.cpus, 0),
    memoryBytes: n.resources.memoryBytes,
    memoryAllocatedBytes: placed.reduce((sum, a) => sum + a.memoryBytes, 0),
    actors: placed.length,
    gpus,
  };
}

/** Top-level graphs only: a named sub-graph is drawn inside the graph that holds it. */
function topLevel(graphs: GraphSource): StatusGraph[] {
  const views = graphs.views();
  const inner = new Set<string>();
  const walk = (p: PlanNode, top: boolean) => {
    if (!top && p.kind !== 'model' && p.kind !== 'fn') inner.add(p.name);
    if (p.kind === 'pipeline') p.steps.forEach((s) => walk(s, false));
    else if (p.kind === 'ensemble') p.members.forEach((m) => walk(m, false));
    else if (p.kind === 'dataParallel') walk(p.step, false);
  };
  const plans = new Map<string, PlanNode>();
  for (const v of views) {
    const plan = graphs.plan(v.name);
    if (!plan) continue;
    plans.set(v.name, plan);
    walk(plan, true);
  }
  return views
    .filter((v) => plans.has(v.name) && !inner.has(v.name))
    .map((v) => ({ name: v.name, kind: v.kind, steps: v.steps, deployments: v.deployments, dag: graphDag(plans.get(v.name)!) }));
}

/**
 * What the page shows, from the head's state: nodes with what is allocated on them and who holds
 * each GPU, deployments with their recent rates, every actor with its last error, and the graphs
 * as boxes and arrows. Series and events are added by the stream (only what is new).
 */
export function buildSnapshot(
  state: ClusterState,
  graphs: GraphSource,
  sampler: ClusterSampler,
  feed: EventFeed,
  draining: boolean,
): SnapshotBase {
  const store = sampler.store;
  const actors = [...state.deployments.values()].flatMap((d) => d.actors);
  feed.prune(new Set(actors.map((a) => a.id)));
  const gpuUtil = (node: string, index: number) => store.mean(seriesId('util', gpuSubject(node, index)), SMOOTHING_SAMPLES);

  const deployments = [...state.deployments.values()].map((d): StatusDeployment => {
    const view = state.deploymentView(d);
    const failed = Object.values(view.requests.failed).reduce((a, b) => a + b, 0);
    return {
      name: view.name,
      model: view.model,
      kind: d.spec.kind ?? 'model',
      replicas: view.replicas,
      state: view.state,
      unhealthy: d.unhealthy,
      queued: view.queued,
      ok: view.requests.ok,
      failed,
      rps: store.mean(seriesId('rps', view.name), SMOOTHING_SAMPLES) ?? 0,
      p50Ms: view.requests.p50Ms,
      p99Ms: view.requests.p99Ms,
      meanBatch: store.mean(seriesId('batch', view.name), SMOOTHING_SAMPLES),
      actors: d.actors.map((a) => a.name),
      ...(d.spec.multiplex ? { models: topModels(d.actors) } : {}),
    };
  });

  const actorViews = actors.map((a): StatusActor => {
    const v = state.actorView(a);
    return {
      id: v.id,
      name: v.name,
      deployment: v.deployment,
      state: v.state,
      reason: v.reason,
      node: v.node,
      device: v.device,
      gpus: v.gpus,
      gpuShare: a.gpuShare,
      pid: v.pid,
      restarts: v.restarts,
      inFlight: v.inFlight,
      queued: v.stats?.queued ?? 0,
      calls: v.stats?.calls ?? 0,
      stateBytes: v.stats?.stateBytes ?? null,
      gpuMemoryMiB: v.gpuMemoryMiB,
      models: modelsOf(v.stats?.models),
      lastError: feed.lastError(v.id),
    };
  });

  return {
    time: Date.now(),
    nodes: [...state.nodes.values()].map((n) => nodeOf(n, actors, gpuUtil)),
    deployments,
    actors: actorViews,
    graphs: topLevel(graphs),
    headLoopDelay: headLoopDelay(),
    readiness: readinessBody(serverReadiness(state, draining)),
  };
}

/** A multiplexed replica's report, summed for the actors table. */
function modelsOf(
  models: Record<string, { loads: number; hits: number; misses: number; loaded: boolean }> | undefined,
): StatusActor['models'] {
  if (!models) return undefined;
  const all = Object.entries(models);
  const sum = (key: 'loads' | 'hits' | 'misses') => all.reduce((n, [, c]) => n + c[key], 0);
  return {
    loaded: all
      .filter(([, c]) => c.loaded)
      .map(([name]) => name)
      .sort(),
    loads: sum('loads'),
    hits: sum('hits'),
    misses: sum('misses'),
  };
}

/** A multiplexed deployment's most called models over its replicas' reports. */
function topModels(actors: readonly ActorRecord[]): NonNullable<StatusDeployment['models']> {
  const sums = new Map<string, { name: string; loads: number; hits: number; misses: number; replicas: number }>();
  for (const a of actors) {
    if (a.state === 'DEAD') continue;
    for (const [name, c] of Object.entries(a.stats?.models ?? {})) {
      const sum = sums.get(name) ?? { name, loads: 0, hits: 0, misses: 0, replicas: 0 };
      sum.loads += c.loads;
      sum.hits += c.hits;
      sum.misses += c.misses;
      sum.replicas += c.loaded ? 1 : 0;
      sums.set(name, sum);
    }
  }
  return [...sums.values()].sort((x, y) => y.hits + y.misses - (x.hits + x.misses)).slice(0, 10);
}
