import type { ModelDeployment } from '../../runtime/internal.js';
import { choosesReplicasAtLoad } from '../state/record-changes.js';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';
import { place } from './scheduler.js';

/** A replica about to be added, held against its node's CPUs and memory as a placed one is (head/control/usage.ts). */
function toBeAdded(d: DeploymentRecord, node: NodeRecord): ActorRecord {
  const held: Pick<ActorRecord, 'nodeId' | 'state' | 'cpus' | 'memoryBytes' | 'deployment' | 'gpus' | 'gpuShare' | 'name'> = {
    nodeId: node.id,
    state: 'STARTING',
    cpus: d.spec.cpus,
    memoryBytes: d.memoryReserved,
    deployment: d.spec.name,
    gpus: [],
    gpuShare: 1,
    name: `${d.spec.name}#(to be added)`,
  };
  // Only what usageOn reads: it is never stored, scheduled or started.
  return held as ActorRecord;
}

export interface ReplicasChosen {
  replicas: number;
  /** Why, as describe() and the events say it. */
  why: string;
}

/**
 * How many replicas `d` runs once one of its replicas measured its model and asked for `wanted`
 * (actors/auto-layout.ts: one per core for a model costly on a CPU): as many more as fit now on
 * the ALIVE nodes beside everything placed, never fewer than it runs. A replica that would wait
 * for room is not added: the ones running already serve, each with the CPU it holds.
 */
export function replicasAtLoad(d: DeploymentRecord, wanted: number, nodes: NodeRecord[], actors: Iterable<ActorRecord>): ReplicasChosen {
  const current = d.spec.replicas;
  const held = [...actors];
  let replicas = current;
  while (replicas < wanted) {
    const at = place({ cpus: d.spec.cpus, gpus: d.spec.gpus, memoryBytes: d.memoryReserved }, d.spec.name, nodes, held, d.spec.placement);
    if (!at.ok) break;
    held.push(toBeAdded(d, at.node));
    replicas++;
  }
  const asked = `its replica measured the model and asked for ${wanted} (one per core, each a session of one thread)`;
  const why =
    replicas === wanted
      ? `${replicas} replica${replicas === 1 ? '' : 's'} chosen at load: ${asked}`
      : `${replicas} replica${replicas === 1 ? '' : 's'} chosen at load: ${asked}; ${wanted - replicas} more would not fit beside what the nodes hold now`;
  return { replicas, why };
}

/**
 * What `a`, just READY, asks of its deployment `d`: the replicas chosen at load where that is more
 * than `d` runs, else undefined (a replica of a cheap model, or of a count named, asks nothing).
 */
export function replicasAsked(
  a: ActorRecord,
  d: DeploymentRecord,
  nodes: NodeRecord[],
  actors: Iterable<ActorRecord>,
): ReplicasChosen | undefined {
  const wanted = a.layout?.replicasWanted;
  if (wanted === undefined || wanted <= d.spec.replicas || a.superseded || !choosesReplicasAtLoad(d.spec)) return undefined;
  const chosen = replicasAtLoad(d, wanted, nodes, actors);
  return chosen.replicas > d.spec.replicas ? chosen : undefined;
}

/**
 * `next` as it replaces `current`: the same model deployed again with its count still left to the
 * head keeps the replicas chosen at load, whatever else changes (its replicas, READY already, will
 * not ask again; an update's new replicas would ask while the old ones still hold the CPUs, and
 * get fewer). Another model starts from one replica and asks again: the count follows its cost.
 */
export function keepChosenReplicas(current: ModelDeployment | undefined, next: ModelDeployment): ModelDeployment {
  if (!current || !choosesReplicasAtLoad(current) || !choosesReplicasAtLoad(next) || next.replicas >= current.replicas) return next;
  return current.model === next.model ? { ...next, replicas: current.replicas } : next;
}

/**
 * Whether `d`'s replicas must be replaced for `next`: they hold one session each, as replicas
 * whose count the head chose (a costly model's), and `next` names the count, so that a replica
 * takes the host's cores in sessions of its own again (actors/auto-layout.ts).
 */
export function leavesChosenReplicas(d: DeploymentRecord, next: ModelDeployment): boolean {
  return choosesReplicasAtLoad(d.spec) && !choosesReplicasAtLoad(next) && d.actors.some((a) => a.layout?.replicasWanted !== undefined);
}
