import { TroupeError } from '../errors.js';
import type { ClassLabels } from '../spec.js';
import type { ModelMetadata } from '../protocol/common.js';
import { checkWire } from '../tensor/wire.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { validateInputs } from '../validate-inputs.js';
import type { ClientToHead } from '../protocol/client.js';

/** The only version each deployment has, in the Open Inference Protocol's terms. */
export const MODEL_VERSION = '1';

export type Params = { name: string; version?: string };

/** One inference: a run of a deployment, as the SDK's run message carries it. */
export type InferenceRequest = Omit<Extract<ClientToHead, { type: 'run' }>, 'id' | 'type'>;

/** What serving an inference needs to know of a deployment or graph: its name, kind and signature. */
export interface InferTarget {
  name: string;
  /** 'class': a class actor, whose methods take values; it answers no tensor inference (see {@link checkInferRequest}). */
  kind: 'model' | 'fn' | 'class' | 'graph';
  /**
   * A deployment's: null until a replica is READY and has said what it takes. A graph's: inferred
   * from its nodes' signatures, null where a fn step declares none.
   */
  metadata: ModelMetadata | null;
  /** The class labels, for the classification extension (a spec's label files as read). */
  labels?: ClassLabels | undefined;
  /**
   * An autoscaled deployment starts a replica for a call that finds none: without metadata, such a
   * call is not refused as not ready but waits in the head, which checks it once a replica is READY.
   */
  startsOnDemand?: boolean;
  /** A deployment split between versions: version -> the deployment that runs it (a URL may pin one). */
  versions?: Record<string, string> | undefined;
  /** A multiplexed deployment: each call names a model of its set, checked by the replica that runs it. */
  multiplexed?: boolean;
  /** The model of a multiplexed deployment a URL named (`/v2/models/{deployment}:{model}`). */
  model?: string;
}

/** `deployment:model` (a multiplexed deployment's model) apart; a plain name has no model. */
export function splitModelName(name: string): { deployment: string; model: string | undefined } {
  const colon = name.indexOf(':');
  return colon < 0 ? { deployment: name, model: undefined } : { deployment: name.slice(0, colon), model: name.slice(colon + 1) };
}

/** Whether `target` takes whatever it is given: a fn that declares nothing, or a graph whose signature is not known. */
export function takesAnything(target: InferTarget): boolean {
  if (target.kind === 'graph') return target.metadata === null;
  return (
    !target.metadata ||
    target.multiplexed === true ||
    (target.kind === 'fn' && target.metadata.inputs.length === 0 && target.metadata.outputs.length === 0)
  );
}

/** A class actor named where tensors go (a run, an inference request, a job). */
export function notTensorTarget(name: string): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_BAD_REQUEST',
    `'${name.slice(0, 64)}' is a class actor: it takes method calls (cluster.actorHandle('${name.slice(0, 64)}').call(method, ...args), POST /api/v1/actors/${name.slice(0, 64)}/{method}), not tensors`,
  );
}

/**
 * The checks made before a call is queued (as head/calls/inference.ts makes them for a deployment): well-formed
 * tensors, a deployment with a READY replica (or one that starts on demand), inputs and outputs that fit the signature.
 */
export function checkInferRequest(target: InferTarget, request: InferenceRequest): void {
  if (target.kind === 'class') throw notTensorTarget(target.name);
  for (const [name, t] of Object.entries(request.inputs)) checkWire(t, `input '${name}'`);
  if (!target.metadata && target.kind !== 'graph') {
    if (target.startsOnDemand) return;
    throw new TroupeError('TROUPE_ERR_NOT_READY', `deployment '${target.name}' has no READY replica yet`);
  }
  if (!takesAnything(target)) validateInputs(target.name, target.metadata!, request.inputs, request.outputs);
}

/**
 * Where inference requests go: the head's own queue (in the head), or the SDK's direct routes
 * (in a front-door worker, head/front-door/). Both answer the same requests with the same errors.
 */
export interface InferenceBackend {
  /** The deployment a URL names; throws TROUPE_ERR_UNKNOWN_DEPLOYMENT. */
  target(params: Params): InferTarget | Promise<InferTarget>;
  run(request: InferenceRequest): Promise<InferenceAnswer>;
}

/** An inference's outputs, and which version of a deployment split between versions ran it (absent for any other). */
export interface InferenceAnswer {
  outputs: WireTensorMap;
  version?: string;
}

/**
 * `params`' deployment, found with `lookup`, or the 404. The 404 names only what was asked for:
 * inference and metadata may be open to callers without the cluster token, who must not learn
 * the other deployments' names from a guess.
 */
export function findTarget(params: Params, lookup: (name: string) => InferTarget | undefined): InferTarget {
  const { deployment, model } = splitModelName(params.name);
  const found = lookup(deployment);
  if (found && model !== undefined && !found.multiplexed)
    throw new TroupeError(
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      `model '${deployment}' serves one model; '${params.name.slice(0, 200)}' names none`,
    );
  if (found && found.multiplexed && model === undefined)
    throw new TroupeError(
      'TROUPE_ERR_BAD_REQUEST',
      `deployment '${deployment}' serves several models: name one, /v2/models/${deployment}:MODEL/infer`,
    );
  const target = found && model !== undefined ? { ...found, model } : found;
  if (!target) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `unknown model '${params.name.slice(0, 100)}'`);
  if (params.version === undefined) return target;
  const pinned = target.versions ? target.versions[params.version] : params.version === MODEL_VERSION ? target.name : undefined;
  const version = pinned === undefined ? undefined : pinned === target.name ? target : lookup(pinned);
  if (!version) throw unknownVersion(params.name, params.version, target.versions ? Object.keys(target.versions) : [MODEL_VERSION]);
  // A pinned version of a multiplexed set runs the model the name gave.
  return model !== undefined && version !== target ? { ...version, model } : version;
}

/** The 404 for a version a model does not have, naming those it has. */
export function unknownVersion(name: string, version: string, versions: readonly string[]): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
    `model '${name}' has no version '${version.slice(0, 40)}' (versions: ${versions.join(', ')})`,
  );
}
