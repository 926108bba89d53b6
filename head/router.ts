import { TroupeError } from '../runtime/index.js';
import type { WireTensorMap } from '../runtime/index.js';
import type { ActorLink } from './actor-link.js';
import type { ActorRecord, DeploymentRecord } from './state.js';

export interface CallOptions {
  outputs?: string[];
  /** Absolute time (Date.now()) after which the caller no longer wants the answer. */
  deadline?: number;
  /** How many times a call whose actor died is retried on another replica (inference is idempotent). */
  maxRetries?: number;
}

type ReadyActor = ActorRecord & { link: ActorLink };

function readyReplicas(d: DeploymentRecord, exclude: ReadonlySet<string>): ReadyActor[] {
  return d.actors.filter((a): a is ReadyActor => a.state === 'READY' && a.link !== undefined && !a.link.closed && !exclude.has(a.id));
}

/** The replica with the fewest calls outstanding; ties go to the earlier replica. */
function leastLoaded(replicas: ReadyActor[]): ReadyActor | undefined {
  let best: ReadyActor | undefined;
  for (const r of replicas) if (!best || r.link.inFlight < best.link.inFlight) best = r;
  return best;
}

function withDeadline<T>(promise: Promise<T>, deadline: number | undefined, what: string): Promise<T> {
  if (deadline === undefined) return promise;
  const left = deadline - Date.now();
  if (left <= 0) return Promise.reject(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `${what}: deadline passed before the call was sent`));
  let timer: NodeJS.Timeout;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `${what}: no answer within the deadline`)), left);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * Sends one call to a replica of a deployment: the least loaded READY one, refusing with
 * TROUPE_ERR_OVERLOADED once every replica holds `maxQueue` calls, and retrying elsewhere when
 * the chosen actor dies before answering.
 */
export async function routeCall(d: DeploymentRecord, inputs: WireTensorMap, options: CallOptions = {}): Promise<WireTensorMap> {
  const tried = new Set<string>();
  const maxRetries = options.maxRetries ?? 2;
  for (let attempt = 0; ; attempt++) {
    const replicas = readyReplicas(d, tried);
    const replica = leastLoaded(replicas);
    if (!replica) {
      const states = d.actors.map((a) => `${a.name} ${a.state}`).join(', ') || 'no replicas';
      throw new TroupeError('TROUPE_ERR_NOT_READY', `deployment '${d.spec.name}' has no READY replica (${states})`);
    }
    if (replica.link.inFlight >= d.spec.maxQueue) {
      throw new TroupeError('TROUPE_ERR_OVERLOADED', `deployment '${d.spec.name}' is at its queue limit (${d.spec.maxQueue} per replica)`);
    }
    tried.add(replica.id);
    try {
      return await withDeadline(replica.link.call(inputs, options.outputs), options.deadline, `deployment '${d.spec.name}'`);
    } catch (err) {
      const died = err instanceof TroupeError && err.code === 'TROUPE_ERR_ACTOR_DIED';
      if (!died || attempt >= maxRetries) throw err;
    }
  }
}
