import { TroupeError, WireTensorMapSchema, validateInputs } from '../../runtime/internal.js';
import type { LeafInfo, LeafResult, WireTensorMap } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';
import { Dispatcher } from './dispatcher.js';

/**
 * Graph steps that are methods of class actors (runtime/graph: a `method` node, called by the
 * executor as `actor#method`, see leafKey). The tensors go to the least busy instance as the
 * method's one argument and come back as its answer; the method's declared signature, if the
 * class has one, types the step.
 */

/** Whether an executor's leaf key names a method step (`actor#method`) rather than a deployment. */
export function isMethodKey(key: string): boolean {
  return key.includes('#');
}

export function split(key: string): { actor: string; method: string } {
  const at = key.indexOf('#');
  return { actor: key.slice(0, at), method: key.slice(at + 1) };
}

export function classActor(state: ClusterState, actor: string, method: string): DeploymentRecord & { dispatcher: Dispatcher } {
  const d = state.deployments.get(actor);
  if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `method step ${actor}.${method}(): no actor named '${actor}' is deployed`);
  if (d.spec.kind !== 'class' || !(d.dispatcher instanceof Dispatcher))
    throw new TroupeError('TROUPE_ERR_NOT_A_CLASS_ACTOR', `method step ${actor}.${method}(): '${actor}' is not a class actor`);
  return d as DeploymentRecord & { dispatcher: Dispatcher };
}

/**
 * A method step's tensors against the signature its class declares, before the method runs, as a
 * model step's are against its metadata: a method checks nothing itself, so a tensor of the wrong
 * shape would run it (and change its instance's state) and answer wrong numbers. A method that
 * declares no signature takes whatever it is given.
 */
export function checkMethodInputs(d: DeploymentRecord, method: string, inputs: WireTensorMap): void {
  const declared = d.actors.find((a) => a.classMethods)?.classMethods?.[method];
  if (declared && declared.inputs.length > 0) validateInputs(`${d.spec.name}.${method}()`, declared, inputs);
}

/**
 * What the graph checks know of a method step: the signature its class declares (from a READY
 * instance's report), or none (it then takes whatever it is given, as a fn without one). A
 * method the class does not have is refused, at deploy and at run.
 */
export function methodStepInfo(state: ClusterState, key: string): LeafInfo {
  const { actor, method } = split(key);
  const d = classActor(state, actor, method);
  const methods = d.actors.find((a) => a.state === 'READY' && a.classMethods)?.classMethods;
  if (!methods) return { kind: 'fn', metadata: null };
  if (!Object.hasOwn(methods, method)) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_SPEC',
      `class actor '${actor}' has no method '${method}' (its methods: ${Object.keys(methods).join(', ') || 'none'})`,
    );
  }
  return { kind: 'fn', metadata: methods[method] ?? { inputs: [], outputs: [] } };
}

/**
 * Whether a method step streams: its method is a generator, as an instance of its class reported
 * when it was READY (the record keeps it while the instance restarts: the class is the same).
 */
export function methodStepStreams(state: ClusterState, key: string): boolean {
  const { actor, method } = split(key);
  const d = state.deployments.get(actor);
  return d?.actors.find((a) => a.classStreams)?.classStreams?.includes(method) ?? false;
}

export function methodStepReplicas(state: ClusterState, key: string): number {
  return state.deployments.get(split(key).actor)?.actors.filter((a) => a.state === 'READY').length ?? 0;
}

/** One run of a method step: its inputs to an instance, its answer checked as tensors. */
export async function callMethodStep(
  state: ClusterState,
  key: string,
  inputs: WireTensorMap,
  deadline: number | undefined,
): Promise<LeafResult> {
  const { actor, method } = split(key);
  const d = classActor(state, actor, method);
  checkMethodInputs(d, method, inputs);
  const reply = await d.dispatcher.methods.submit(method, [inputs], { deadline, tensors: true });
  const outputs = WireTensorMapSchema.safeParse(reply.value);
  if (!outputs.success)
    throw new TroupeError(
      'TROUPE_ERR_METHOD_FAILED',
      `${actor}.${method}() answered something other than tensors: ${outputs.error.issues[0]?.message}`,
    );
  return { outputs: outputs.data };
}
