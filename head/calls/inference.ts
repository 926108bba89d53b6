import { TroupeError, checkWire, isDynamic, notTensorTarget, validateInputs } from '../../runtime/internal.js';
import type { CallResult, InferenceAnswer, InferenceRequest } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import { pickVersion, versionDeploymentName, versionName } from '../control/versions.js';
import type { DeploymentRecord } from '../state/records.js';
import { startsOnDemand } from './cold-start.js';

export type { InferenceRequest };

/** A call's result, and the version that ran it when the deployment called runs one of a split (undefined otherwise). */
export interface InferenceResult extends CallResult {
  version?: string | undefined;
}

/**
 * One call to a model deployment, checked before any work is queued (so a bad call costs the
 * cluster nothing), then queued for a replica. A deployment scaled from zero that no replica has
 * described yet is checked once its first replica is READY. Outcome and latency go to the deployment's stats.
 */
export async function runInferenceTimed(state: ClusterState, request: InferenceRequest): Promise<InferenceResult> {
  const d = state.deployments.get(request.deployment);
  if (!d) {
    const known = [...state.deployments.keys()].map((n) => `'${n}'`).join(', ') || 'none';
    throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${request.deployment}' (deployed: ${known})`);
  }
  if (d.spec.versions) return runVersion(state, d, request);
  if (d.spec.kind === 'class') throw notTensorTarget(d.spec.name);
  checkModelChoice(d, request);
  for (const [name, t] of Object.entries(request.inputs)) checkWire(t, `input '${name}'`);
  if (!d.metadata && !startsOnDemand(d.spec))
    throw new TroupeError('TROUPE_ERR_NOT_READY', `deployment '${d.spec.name}' has no READY replica yet`);
  const refused = d.spec.replicas === 0 ? d.startRefused : undefined;
  if (refused && Date.now() < refused.until)
    throw new TroupeError(
      refused.error.code,
      `${refused.error.message} (the next start of a replica is tried in ${Math.ceil((refused.until - Date.now()) / 1000)} s)`,
    );
  const deadline = request.timeoutMs !== undefined ? Date.now() + request.timeoutMs : undefined;
  const started = performance.now();
  try {
    if (!d.metadata) {
      const waited = d.coldStart.wait(d.spec.name, deadline, () => describeActors(d));
      state.autoscaleNow(d);
      await waited;
    }
    // A fn that declares no signature takes whatever it is given; it checks its own inputs, as a
    // multiplexed replica checks each call against the model it names.
    if (!d.spec.multiplex && !isDynamic({ kind: d.spec.kind === 'fn' ? 'fn' : 'model', metadata: d.metadata! }))
      validateInputs(d.spec.name, d.metadata!, request.inputs, request.outputs);
    const submitted = d.dispatcher.submit(request.inputs, {
      ...(request.outputs ? { outputs: request.outputs } : {}),
      ...(deadline !== undefined ? { deadline } : {}),
      ...(request.model !== undefined ? { model: request.model } : {}),
    });
    if (d.spec.replicas === 0) state.autoscaleNow(d);
    const result = await submitted;
    const ms = performance.now() - started;
    d.stats.record(ms);
    state.metrics.observe(d.spec.name, ms / 1000, result);
    const version = versionName(d.spec);
    return version === undefined ? result : { ...result, version };
  } catch (err) {
    d.stats.record(performance.now() - started, err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL');
    throw err;
  }
}

/** A multiplexed deployment's call names one of its models; another deployment's call names none. */
function checkModelChoice(d: DeploymentRecord, request: InferenceRequest): void {
  if (d.spec.multiplex && request.model === undefined)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `deployment '${d.spec.name}' serves several models: name one (POST /v2/models/${d.spec.name}:MODEL/infer, run(name, inputs, { model }))`,
    );
  if (!d.spec.multiplex && request.model !== undefined)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `deployment '${d.spec.name}' serves one model; a model is named only for a multiplexed deployment`,
    );
}

/** Whether a version's deployment can take a call now: a READY replica, or one that starts for the call. */
export function versionServes(state: ClusterState, deployment: string): boolean {
  const d = state.deployments.get(deployment);
  if (!d || d.unhealthy) return false;
  return startsOnDemand(d.spec) || (d.metadata !== null && d.actors.some((a) => a.state === 'READY'));
}

/**
 * When no version the spec lists can serve yet (a PUT replaced every version, or the only one's
 * model changed), a version the spec dropped that still serves takes the call: it keeps running
 * until one listed can serve (head/control/deployments.ts), so the change loses no call.
 */
function leftOver(state: ClusterState, d: DeploymentRecord, picked: string): string | undefined {
  if (versionServes(state, picked)) return undefined;
  const listed = new Set(d.spec.versions!.map((v) => versionDeploymentName(d.spec.name, v.version)));
  for (const other of state.deployments.values())
    if (other.spec.versionOf === d.spec.name && !listed.has(other.spec.name) && versionServes(state, other.spec.name))
      return other.spec.name;
  return undefined;
}

/** A call to a deployment split between versions: run by the version the split picks, counted by both. */
async function runVersion(state: ClusterState, d: DeploymentRecord, request: InferenceRequest): Promise<InferenceResult> {
  const started = performance.now();
  try {
    const picked = pickVersion(d.spec, (name) => versionServes(state, name));
    const result = await runInferenceTimed(state, { ...request, deployment: leftOver(state, d, picked.deployment) ?? picked.deployment });
    d.stats.record(performance.now() - started);
    return result;
  } catch (err) {
    d.stats.record(performance.now() - started, err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL');
    throw err;
  }
}

/** {@link runInferenceTimed}: the outputs, and the version that ran the call when it ran one. */
export async function runInference(state: ClusterState, request: InferenceRequest): Promise<InferenceAnswer> {
  const { outputs, version } = await runInferenceTimed(state, request);
  return version === undefined ? { outputs } : { outputs, version };
}

/** Each actor of `d` with its state, and why where it is not READY: what a caller waiting for one is told. */
function describeActors(d: DeploymentRecord): string {
  if (d.actors.length === 0) return 'no replica started yet';
  return d.actors.map((a) => `${a.name} ${a.state}${a.reason ? `: ${a.reason}` : ''}`).join('; ');
}
