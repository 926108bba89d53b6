import type { ModelDeployment } from '../../runtime/internal.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';
import { returnToPending } from '../state/record-changes.js';
import { place } from './scheduler.js';

/**
 * Surge updates: an update that needs new replicas (another model, resource shape, batching)
 * keeps the READY ones of the spec it replaces serving (`superseded`) until the new spec's
 * replicas are READY, so no call sees a gap; a refused update puts them back as they were. The
 * controller decides when; these are the record changes each step makes.
 */

/** `d` is being replaced: its READY replicas serve on as superseded, the rest go now (through `retire`). */
export function supersede(d: DeploymentRecord, retire: (a: ActorRecord) => void): void {
  for (const a of d.actors) if (!a.superseded && a.state !== 'READY') retire(a);
  d.actors = d.actors.filter((a) => a.superseded || a.state === 'READY');
  for (const a of d.actors) a.superseded = true;
  if (d.actors.length === 0) {
    d.metadata = null;
    d.labelLines = null;
  }
}

/** A refused update of `d`: the superseded replicas, which never stopped, serve `before` again; the new ones go. */
export function unsupersede(d: DeploymentRecord, before: ModelDeployment, retire: (a: ActorRecord) => void): void {
  for (const a of d.actors) if (!a.superseded) retire(a);
  d.actors = d.actors.filter((a) => a.superseded);
  for (const a of d.actors) a.superseded = false;
  d.spec = before;
  d.unhealthy = null;
}

/** The new spec's replicas are READY: the superseded ones stop (each finishes its in-flight calls first). False when there were none. */
export function retireSuperseded(d: DeploymentRecord, retire: (a: ActorRecord) => void): boolean {
  if (!d.actors.some((a) => a.superseded)) return false;
  for (const a of d.actors) if (a.superseded) retire(a);
  d.actors = d.actors.filter((a) => !a.superseded);
  return true;
}

/** A superseded replica whose process is gone: not placed again, the new spec's replicas serve without it. */
export function dropSuperseded(state: ClusterState, a: ActorRecord): void {
  const d = state.deployments.get(a.deployment);
  if (d) d.actors = d.actors.filter((x) => x !== a);
  returnToPending(a, 'its node did not come back');
  state.actors.delete(a.id);
}

/**
 * Whether the superseded replicas should make room: the new spec's replicas wait for placement
 * and would fit somewhere once those gave back what they hold (a replace, not a surge). A new
 * spec that needs what no node has (a GPU on CPU-only nodes) gains nothing from it: they serve on.
 */
export function shouldMakeRoom(d: DeploymentRecord, nodes: NodeRecord[], actors: Iterable<ActorRecord>): boolean {
  if (!d.actors.some((a) => a.superseded) || !d.actors.some((a) => a.state === 'PENDING' && !a.superseded)) return false;
  const left = [...actors].filter((a) => !(a.superseded && a.deployment === d.spec.name));
  return place({ cpus: d.spec.cpus, gpus: d.spec.gpus, memoryBytes: d.memoryReserved }, d.spec.name, nodes, left, d.spec.placement).ok;
}
