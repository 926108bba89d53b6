import { findTarget } from '../../runtime/index.js';
import type { InferTarget, InferenceBackend, Params } from '../../runtime/index.js';
import { runInference } from '../inference.js';
import type { ClusterState, DeploymentRecord } from '../state.js';

export function targetOf(d: DeploymentRecord): InferTarget {
  return { name: d.spec.name, kind: d.spec.kind ?? 'model', metadata: d.metadata, ...(d.spec.labels ? { labels: d.spec.labels } : {}) };
}

/** The deployment record a URL names, or TROUPE_ERR_UNKNOWN_DEPLOYMENT (404). */
export function deploymentOf(state: ClusterState, params: Params): DeploymentRecord {
  let found: DeploymentRecord | undefined;
  findTarget(params, (name) => (found = state.deployments.get(name)) && targetOf(found), () => state.deployments.keys());
  return found!;
}

/** Inference served by the head itself: its deployments and its queue to their replicas. */
export function stateBackend(state: ClusterState): InferenceBackend {
  return {
    target: (params) => targetOf(deploymentOf(state, params)),
    run: (request) => runInference(state, request),
  };
}
