import type { GraphView, PlanNode } from '../../runtime/internal.js';
import { fromMilli, groupLoads, sumAmounts, toMilli } from '../../runtime/internal.js';
import { headLoopDelay } from '../state/event-loop.js';
import { versionDeploymentName } from '../control/versions.js';
import { readinessBody, serverReadiness } from '../control/readiness.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';
import { layoutView } from '../state/deployment-layout.js';
import type {
  ActorStateName,
  StatusActor,
  StatusDeployment,
  StatusGpu,
  StatusGraph,
  StatusNode,
  StatusSummary,
  StatusUpdate,
} from './client/protocol.js';
import { graphDag } from './dag.js';
import type { EventFeed } from './event-feed.js';
import { seriesId } from './sampler.js';
import type { ClusterSampler } from './sampler.js';

/** The graphs the head has registered (head/graph's RunGateway). */
export interface GraphSource {
  views(): GraphView[];
  plan(name: string): PlanNode | undefined;
}

/** CPU-only actors a node's card names; the rest are counted (a CPU node may run hundreds). */
const CPU_ACTORS_SHOWN = 32;

/** Seconds the table figures (req/s, mean batch) average over, so they do not jump every second. */
const SMOOTHING_SAMPLES = 5;

/** Actors that hold resources on their node (the scheduler's own rule). */
const holdsResources = (a: ActorRecord): boolean => a.nodeId !== null && a.state !== 'DEAD' && a.state !== 'PENDING';

function nodeOf(n: NodeRecord, placed: readonly ActorRecord[], gpuUtil: (node: string, index: number) => number | null): StatusNode {
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
      allocated: sumAmounts(holders.map((h) => h.share)),
      holders,
    };
  });
  const onCpu = placed.filter((a) => a.gpus.length === 0);
  return {
    id: n.id,
    name: n.name,
    state: n.state,
    address: n.address,
    cpus: n.resources.cpus,
    cpusAllocated: sumAmounts(placed.map((a) => a.cpus)),
    memoryBytes: n.resources.memoryBytes,
    memoryAllocatedBytes: placed.reduce((sum, a) => sum + a.memoryBytes, 0),
    actors: placed.length,
    gpus,
    cpuActors: onCpu.slice(0, CPU_ACTORS_SHOWN).map((a) => ({ name: a.name, deployment: a.deployment, state: a.state })),
    cpuActorsTotal: onCpu.length,
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

/** The figures of one push that every page gets alike; each page's windows are cut from it (windows.ts). */
export type SharedPart = Pick<StatusUpdate, 'time' | 'summary' | 'headLoopDelay' | 'readiness'>;

/**
 * The cluster as one push sees it, computed once and shared by every page: the summary, every
 * deployment's figures and the graphs (small), and the nodes and actors as records, turned into
 * rows only for the rows some page's window holds (`nodeRow`, `actorRow`, memoised for the push).
 * Nothing here walks the cluster more than once: at 3,000 nodes and 15,000 actors the old
 * snapshot's per-node scan of every actor was 45 million steps a second.
 */
export class StatusFrame {
  readonly shared: SharedPart;
  readonly deployments: StatusDeployment[];
  readonly graphs: StatusGraph[];
  readonly nodes: NodeRecord[];
  readonly actors: ActorRecord[];
  readonly #state: ClusterState;
  readonly #sampler: ClusterSampler;
  readonly #feed: EventFeed;
  /** Actors holding resources, by node id. */
  readonly #placed = new Map<string, ActorRecord[]>();
  readonly #nodeRows = new Map<string, StatusNode>();
  readonly #actorRows = new Map<string, StatusActor>();
  readonly #memo = new Map<string, unknown>();
  readonly #graphCount: number;

  constructor(state: ClusterState, graphs: GraphSource, sampler: ClusterSampler, feed: EventFeed, draining: boolean) {
    this.#state = state;
    this.#sampler = sampler;
    this.#feed = feed;
    const store = sampler.store;
    this.nodes = [...state.nodes.values()];
    this.actors = [...state.deployments.values()].flatMap((d) => d.actors);
    feed.prune(new Set(this.actors.map((a) => a.id)));
    for (const a of this.actors) {
      if (!holdsResources(a)) continue;
      const list = this.#placed.get(a.nodeId!);
      if (list) list.push(a);
      else this.#placed.set(a.nodeId!, [a]);
    }
    const layoutOf = (d: DeploymentRecord) => {
      const layout = (d.spec.kind ?? 'model') === 'model' ? layoutView(d, state.httpServing(d.spec.name)) : undefined;
      return layout ? { layout: { chosen: layout.chosen, reason: layout.reason } } : {};
    };
    this.deployments = [...state.deployments.values()].map((d): StatusDeployment => {
      // Not state.deploymentView(d): that builds a view of every actor, 15,000 objects a second at 3,000 nodes.
      const name = d.spec.name;
      const requests = d.stats.snapshot();
      const failed = Object.values(requests.failed).reduce((a, b) => a + b, 0);
      const states: Partial<Record<ActorStateName, number>> = {};
      // A split runs no replica itself: its row counts its versions' replicas and actors (each
      // version also has a row of its own), not "0/1" of a deployment that never starts one.
      const versions = d.spec.versions?.map((v) => ({ ...v, runs: state.deployments.get(versionDeploymentName(name, v.version)) }));
      const actors = versions ? versions.flatMap((v) => v.runs?.actors ?? []) : d.actors;
      for (const a of actors) states[a.state] = (states[a.state] ?? 0) + 1;
      return {
        name,
        model: d.spec.model,
        kind: d.spec.kind ?? 'model',
        replicas: versions ? versions.reduce((sum, v) => sum + (v.runs?.spec.replicas ?? 0), 0) : d.spec.replicas,
        ...(versions
          ? {
              versions: versions.map((v) => {
                const deployment = versionDeploymentName(name, v.version);
                const calls = v.runs?.stats.snapshot();
                return {
                  version: v.version,
                  weight: v.weight,
                  deployment,
                  model: v.model,
                  replicas: v.runs?.spec.replicas ?? 0,
                  ready: v.runs?.actors.filter((a) => a.state === 'READY').length ?? 0,
                  calls: calls ? calls.ok + Object.values(calls.failed).reduce((a, b) => a + b, 0) : 0,
                  rps: store.mean(seriesId('rps', deployment), SMOOTHING_SAMPLES) ?? 0,
                };
              }),
              ...(d.spec.promotedFrom ? { promotedFrom: d.spec.promotedFrom.map((v) => ({ version: v.version, weight: v.weight })) } : {}),
            }
          : {}),
        state: state.deploymentState(d),
        unhealthy: d.unhealthy,
        queued: d.dispatcher.queued,
        ok: requests.ok,
        failed,
        rps: store.mean(seriesId('rps', name), SMOOTHING_SAMPLES) ?? 0,
        p50Ms: requests.p50Ms,
        p99Ms: requests.p99Ms,
        meanBatch: store.mean(seriesId('batch', name), SMOOTHING_SAMPLES),
        states,
        ...(d.spec.multiplex ? { models: topModels(d.actors) } : {}),
        ...layoutOf(d),
      };
    });
    this.graphs = topLevel(graphs);
    // Every graph, as `troupe status` and GET /api/v1/cluster count them: a named sub-graph is
    // drawn inside its parent on the page, but it is a graph deployed (and callable) all the same.
    this.#graphCount = graphs.views().length;
    this.shared = {
      time: Date.now(),
      summary: this.#summary(),
      headLoopDelay: headLoopDelay(),
      readiness: readinessBody(serverReadiness(state, draining)),
    };
  }

  #summary(): StatusSummary {
    const nodes = { total: this.nodes.length, ALIVE: 0, SUSPECT: 0, DEAD: 0 };
    const gpus = { total: 0, simulated: 0, allocated: 0 };
    // Counted in thousandths (runtime/resources.ts), so the header reads 0.35, not 0.35000000000000003.
    const milli = { cpus: 0, cpusAllocated: 0, gpusAllocated: 0 };
    for (const n of this.nodes) {
      nodes[n.state]++;
      if (n.state === 'DEAD') continue;
      milli.cpus += toMilli(n.resources.cpus);
      gpus.total += n.resources.gpus.length;
      gpus.simulated += n.resources.gpus.filter((g) => g.simulated).length;
      for (const a of this.#placed.get(n.id) ?? []) {
        milli.cpusAllocated += toMilli(a.cpus);
        milli.gpusAllocated += a.gpus.length * toMilli(a.gpuShare);
      }
    }
    gpus.allocated = fromMilli(milli.gpusAllocated);
    const cpus = { total: fromMilli(milli.cpus), allocated: fromMilli(milli.cpusAllocated) };
    const actors = { total: this.actors.length, PENDING: 0, STARTING: 0, READY: 0, DRAINING: 0, RESTARTING: 0, DEAD: 0 };
    for (const a of this.actors) actors[a.state]++;
    return { nodes, actors, gpus, cpus, deployments: this.deployments.length, graphs: this.#graphCount };
  }

  /** The name of the node an actor is on (or, restored after a head restart, was on). */
  nodeNameOf(a: ActorRecord): string | null {
    return this.#state.nodeName(a.nodeId) ?? a.awaitingNode ?? null;
  }

  lastErrorOf(a: ActorRecord): { time: number; message: string } | null {
    return this.#feed.lastError(a.id);
  }

  /** Actors holding resources on a node. */
  placedOn(nodeId: string): readonly ActorRecord[] {
    return this.#placed.get(nodeId) ?? [];
  }

  /** `make()` once per push for each key: what pages looking at the same thing share (a window, a deployment's JSON). */
  once<T>(key: string, make: () => T): T {
    if (this.#memo.has(key)) return this.#memo.get(key) as T;
    const value = make();
    this.#memo.set(key, value);
    return value;
  }

  nodeRow(n: NodeRecord): StatusNode {
    let row = this.#nodeRows.get(n.id);
    if (!row) {
      row = nodeOf(n, this.placedOn(n.id), (node, index) => this.#sampler.gpuUtilization(node, index));
      this.#nodeRows.set(n.id, row);
    }
    return row;
  }

  actorRow(a: ActorRecord): StatusActor {
    let row = this.#actorRows.get(a.id);
    if (!row) {
      const v = this.#state.actorView(a);
      row = {
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
        groups: groupLoads(v.concurrencyGroups, v.stats?.groups),
        lastError: this.#feed.lastError(v.id),
      };
      this.#actorRows.set(a.id, row);
    }
    return row;
  }
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
