import { MODEL_VERSION, TroupeError, datatypeOfDtype, oipShape, unknownVersion } from '../../runtime/internal.js';
import type { Params, TensorInfo } from '../../runtime/internal.js';
import { startsOnDemand } from '../calls/cold-start.js';
import { isMultiplexed, tenantMetadata, tenantNamed, tenantReadiness } from '../control/tenants.js';
import { versionDeploymentName, versionMap } from '../control/versions.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import { targetFor } from './state-backend.js';

/**
 * The Open Inference Protocol's per-model answers (metadata and readiness) as functions of the
 * cluster, so the HTTP routes (oip-routes.ts) and the gRPC service (head/grpc/) cannot disagree.
 */

/** The extensions the server metadata names, over HTTP and gRPC alike. */
export const EXTENSIONS = ['binary_tensor_data', 'classification', 'model_configuration', 'model_repository', 'statistics'];

export interface OipTensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

export interface OipModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: OipTensorMetadata[];
  outputs: OipTensorMetadata[];
}

function tensorMetadata(t: TensorInfo): OipTensorMetadata {
  return { name: t.name, datatype: datatypeOfDtype(t.dtype), shape: oipShape(t.shape) };
}

/**
 * What serves each kind of target, as the protocol's platform names it: an ONNX model, a graph
 * (Triton's ensemble), and Troupe's own code: a fn step, a class actor (which takes method calls,
 * not tensors). The model configuration's backend says the same (triton-config.ts).
 */
export const PLATFORMS = { model: 'onnx_onnxv1', graph: 'ensemble', fn: 'troupe_fn', class: 'troupe_class' } as const;

/**
 * A deployment's or graph's metadata. A graph is a model here too, as Triton's ensembles are:
 * platform "ensemble", its inputs and outputs inferred from its nodes' signatures. A model of a
 * multiplexed set (`{deployment}:{model}`) is one too, described from its file; the multiplexed
 * deployment itself has no one signature: its inputs and outputs are empty.
 */
export async function modelMetadata(state: ClusterState, graphs: RunGateway, params: Params): Promise<OipModelMetadata> {
  const tenant = tenantNamed(state, params);
  const set = tenant?.d ?? state.deployments.get(params.name);
  if (set && isMultiplexed(set)) {
    const versions = versionMap(set.spec);
    if (!tenant && params.version !== undefined && !(versions ? Object.hasOwn(versions, params.version) : params.version === MODEL_VERSION))
      throw unknownVersion(params.name, params.version, versions ? Object.keys(versions) : [MODEL_VERSION]);
    const metadata = tenant ? await tenantMetadata(state, tenant) : { inputs: [], outputs: [] };
    return {
      name: params.name,
      versions: versions ? Object.keys(versions) : [MODEL_VERSION],
      platform: PLATFORMS.model,
      inputs: metadata.inputs.map(tensorMetadata),
      outputs: metadata.outputs.map(tensorMetadata),
    };
  }
  const target = targetFor(state, graphs, params);
  const whole = params.version === undefined ? target : targetFor(state, graphs, { name: params.name });
  if (!target.metadata) {
    const why = target.kind === 'graph' ? 'a step of it is a fn that declares no signature' : 'it has no READY replica yet';
    throw new TroupeError('TROUPE_ERR_NOT_READY', `model '${target.name}': its inputs and outputs are not known (${why})`);
  }
  return {
    name: whole.name,
    versions: whole.versions ? Object.keys(whole.versions) : [MODEL_VERSION],
    platform: PLATFORMS[target.kind],
    inputs: target.metadata.inputs.map(tensorMetadata),
    outputs: target.metadata.outputs.map(tensorMetadata),
  };
}

/** A READY replica to serve a call now, or none wanted: a deployment scaled to zero starts one for the call. */
function isReady(d: DeploymentRecord): boolean {
  if (d.spec.replicas === 0 && startsOnDemand(d.spec) && !d.unhealthy) return true;
  return d.metadata !== null && d.actors.some((a) => a.state === 'READY');
}

/**
 * Whether a model is ready: a deployment with a READY replica whose signature is known (or one
 * scaled to zero that starts for a call), a graph whose every deployment is, a deployment split
 * between versions whose every version that takes calls is, a pinned version by itself, a model
 * of a multiplexed set that can be served now or after a load (control/tenants.ts); 'unknown' for
 * a name (or version) nothing answers to.
 */
export async function modelReadiness(state: ClusterState, graphs: RunGateway, params: Params): Promise<'ready' | 'not ready' | 'unknown'> {
  let tenant;
  try {
    tenant = tenantNamed(state, params);
  } catch {
    return 'unknown';
  }
  if (tenant) return tenantReadiness(state, tenant);
  const used = deploymentsServing(state, graphs, params);
  if (!used) return 'unknown';
  return used.every((d) => d !== undefined && isReady(d)) ? 'ready' : 'not ready';
}

/** The deployments whose replicas serve a name (and version), or undefined when nothing answers to it. */
function deploymentsServing(
  state: ClusterState,
  graphs: RunGateway,
  { name, version }: Params,
): (DeploymentRecord | undefined)[] | undefined {
  const d = state.deployments.get(name);
  const versions = d?.spec.versions;
  if (versions) {
    if (version === undefined)
      return versions.filter((v) => v.weight > 0).map((v) => state.deployments.get(versionDeploymentName(name, v.version)));
    const pinned = versionMap(d.spec)![version];
    return pinned === undefined ? undefined : [state.deployments.get(pinned)];
  }
  if (version !== undefined && version !== MODEL_VERSION) return undefined;
  const graph = graphs.views().find((g) => g.name === name);
  if (graph) return graph.deployments.map((n) => state.deployments.get(n));
  return d ? [d] : undefined;
}
