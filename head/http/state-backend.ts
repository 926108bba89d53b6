import { checkInferRequest, classLabels, findTarget } from '../../runtime/internal.js';
import type { ClassLabels } from '../../runtime/internal.js';
import type { InferTarget, InferenceBackend, Params } from '../../runtime/internal.js';
import { startsOnDemand } from '../calls/cold-start.js';
import { versionMap } from '../control/versions.js';
import { runInference } from '../calls/inference.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';

/** A deployment's class labels: the spec's lists, and its label files as a replica read them. */
export function labelsOf(d: DeploymentRecord): ClassLabels | undefined {
  return classLabels(d.spec.labels, d.labelLines);
}

export function targetOf(d: DeploymentRecord): InferTarget {
  const labels = labelsOf(d);
  return {
    name: d.spec.name,
    kind: d.spec.kind ?? 'model',
    metadata: d.metadata,
    ...(labels ? { labels } : {}),
    ...(startsOnDemand(d.spec) ? { startsOnDemand: true } : {}),
    ...(d.spec.versions ? { versions: versionMap(d.spec) } : {}),
    ...(d.spec.multiplex ? { multiplexed: true } : {}),
  };
}

/**
 * A registered graph as an inference target: its inputs and outputs as its nodes' signatures give
 * them, or none where a fn declares nothing (then its inputs are checked by its steps).
 */
export function graphTargetOf(graphs: RunGateway, name: string): InferTarget | undefined {
  const signature = graphs.signature(name);
  if (!signature) return undefined;
  const { inputs, outputs } = signature;
  return { name, kind: 'graph', metadata: inputs && outputs ? { inputs, outputs } : null };
}

/** What `name` is served as: a graph, or a deployment, or nothing. */
export function lookupTarget(state: ClusterState, graphs: RunGateway, name: string): InferTarget | undefined {
  const d = state.deployments.get(name);
  return graphTargetOf(graphs, name) ?? (d ? targetOf(d) : undefined);
}

/** Every graph and deployment as the front-door workers' catalogs hold them. */
export function allTargets(state: ClusterState, graphs: RunGateway): InferTarget[] {
  const names = [...graphs.views().map((g) => g.name), ...state.deployments.keys()];
  return [...new Set(names)].flatMap((name) => lookupTarget(state, graphs, name) ?? []);
}

/** The deployment or graph a URL names, or TROUPE_ERR_UNKNOWN_DEPLOYMENT (404). */
export function targetFor(state: ClusterState, graphs: RunGateway, params: Params): InferTarget {
  return findTarget(params, (name) => lookupTarget(state, graphs, name));
}

/**
 * Inference served by the head itself: a deployment through its queue to its replicas, a graph
 * through the graph service (checked against the graph's signature first, as a model is against
 * its metadata).
 */
export function stateBackend(state: ClusterState, graphs: RunGateway): InferenceBackend {
  return {
    target: (params) => targetFor(state, graphs, params),
    run: (request) => {
      const graph = graphTargetOf(graphs, request.deployment);
      if (!graph) return runInference(state, request);
      checkInferRequest(graph, request);
      return graphs.infer(request).then((outputs) => ({ outputs }));
    },
  };
}
