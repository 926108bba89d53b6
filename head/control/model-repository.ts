import { TroupeError } from '../../runtime/internal.js';
import { DEFAULT_DEPLOY_TIMEOUT_S, pendingActors } from '../../runtime/deploy-timeout.js';
import type { Controller } from './controller.js';
import { isMultiplexed, tenantEntries } from './tenants.js';
import { boundDeploy } from './deploy-bound.js';
import { MODEL_VERSION as VERSION } from '../../runtime/oip/infer-backend.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import type { GraphView } from '../../runtime/internal.js';

/**
 * Triton's model repository extension mapped onto deployments: the index lists every deployment
 * (and graph) with its state; unload stops a deployment's replicas and keeps its spec; load starts them again.
 * Shared by every protocol that offers it (HTTP now, gRPC later).
 */

/**
 * Triton's model states (model_repository_manager), as the index reports them; a model of a
 * multiplexed set (control/tenants.ts) is LOADED in some replica, or AVAILABLE to load on demand.
 */
export type RepositoryState = 'READY' | 'LOADING' | 'UNAVAILABLE' | 'LOADED' | 'AVAILABLE';

/** The states of models that can serve a call now or after a load: what `{"ready": true}` lists. */
const SERVABLE = new Set<RepositoryState>(['READY', 'LOADED', 'AVAILABLE']);

export interface RepositoryEntry {
  name: string;
  version: string;
  state: RepositoryState;
  reason: string;
}

function entryOf(state: ClusterState, d: DeploymentRecord): RepositoryEntry {
  const view = state.deploymentView(d);
  const name = d.spec.name;
  if (d.spec.replicas === 0) {
    const why =
      d.unloaded?.as === d.spec ? 'unloaded (POST /v2/repository/models/{name}/load starts it again)' : 'deployed with 0 replicas';
    return { name, version: VERSION, state: 'UNAVAILABLE', reason: why };
  }
  if (view.state === 'READY') return { name, version: VERSION, state: 'READY', reason: '' };
  if (view.state === 'UNHEALTHY') return { name, version: VERSION, state: 'UNAVAILABLE', reason: d.unhealthy ?? 'unhealthy' };
  const waiting = pendingActors(view).map((a) => `${a.actor} ${a.state}${a.reason ? `: ${a.reason}` : ''}`);
  return { name, version: VERSION, state: 'LOADING', reason: waiting.join('; ') };
}

/** A graph is READY when every deployment its steps run on is (as a Triton ensemble is when its models are). */
function graphEntryOf(state: ClusterState, graph: GraphView): RepositoryEntry {
  const waiting = graph.deployments.filter((name) => {
    const d = state.deployments.get(name);
    return !d || state.deploymentView(d).state !== 'READY';
  });
  if (waiting.length === 0) return { name: graph.name, version: VERSION, state: 'READY', reason: '' };
  return { name: graph.name, version: VERSION, state: 'UNAVAILABLE', reason: `steps' deployments not READY: ${waiting.join(', ')}` };
}

/**
 * Every deployment and graph, and each model of every multiplexed set (`{deployment}:{model}`,
 * whose replicas list their directories again for it), sorted by name; or only those that can
 * serve a call (READY, LOADED, AVAILABLE).
 */
export async function repositoryIndex(state: ClusterState, graphs: readonly GraphView[], onlyReady: boolean): Promise<RepositoryEntry[]> {
  const sets = [...state.deployments.values()].filter((d) => isMultiplexed(d) && d.spec.versionOf === undefined);
  const tenants = (await Promise.all(sets.map((d) => tenantEntries(state, d)))).flat();
  const entries = [
    ...[...state.deployments.values()].map((d) => entryOf(state, d)),
    ...graphs.map((g) => graphEntryOf(state, g)),
    ...tenants,
  ].sort((a, b) => a.name.localeCompare(b.name));
  return onlyReady ? entries.filter((e) => SERVABLE.has(e.state)) : entries;
}

function deploymentNamed(state: ClusterState, name: string): DeploymentRecord {
  const d = state.deployments.get(name);
  if (!d)
    throw new TroupeError(
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      `no model named '${name.slice(0, 100)}' in the repository (a model is a deployment: PUT /api/v1/deployments/{name} creates one)`,
    );
  return d;
}

/**
 * Stops every replica of `name` (each finishes its calls first) and keeps the deployment, with no
 * replicas and no autoscaling, until a load. Unloading what is unloaded changes nothing.
 */
export async function unloadModel(state: ClusterState, controller: Controller, name: string): Promise<void> {
  const d = deploymentNamed(state, name);
  if (d.spec.replicas === 0 && !d.spec.autoscale) return;
  const { autoscale: _autoscale, ...rest } = d.spec;
  const as = { ...rest, replicas: 0 };
  const spec = d.spec;
  const done = controller.deploy(as);
  // Marked at once (deploy applied `as` synchronously), so an index read meanwhile says why.
  d.unloaded = { spec, as };
  await done;
}

/**
 * Starts `name`'s replicas again (the spec an unload kept, or one replica where a deployment has
 * none for another reason) and answers once they are READY, within the deploy bound.
 */
export async function loadModel(
  state: ClusterState,
  controller: Controller,
  name: string,
  timeoutMs = DEFAULT_DEPLOY_TIMEOUT_S * 1000,
): Promise<void> {
  const d = deploymentNamed(state, name);
  const spec =
    d.unloaded?.as === d.spec
      ? d.unloaded.spec
      : d.spec.replicas === 0
        ? { ...d.spec, replicas: Math.max(1, d.spec.autoscale?.minReplicas ?? 1) }
        : d.spec;
  d.unloaded = undefined;
  await boundDeploy(controller.deploy(spec), timeoutMs, { kind: 'deployment', name }, () => {
    const now = state.deployments.get(name);
    return now ? [state.deploymentView(now)] : [];
  });
}
