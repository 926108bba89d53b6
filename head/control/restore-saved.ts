import type { SavedState } from '../state/durable.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ActorRecord } from '../state/records.js';
import { freeReplicaIndices, newActorRecord, newDeployment, restoredActorRecord } from '../state/record-changes.js';
import type { MemoryReservations } from './memory-estimate.js';
import { ownReplicas, restoredSpecs } from './versions.js';

/**
 * A restarted head's deployments rebuilt from its state file into `state`: the actors that were
 * running come back STARTING, waiting for their node to list them (returned: their `ready` is a
 * rejoin), and replicas with no saved actor are created PENDING. The replicas each deployment
 * runs are computed as a deploy computes them (ownReplicas, restoredSpecs): a deployment split
 * between versions runs none of its own; counting its `replicas` here once started a replica of
 * the split's own `model` that answered for it.
 */
export function restoreSaved(saved: SavedState, state: ClusterState, memory: MemoryReservations): ActorRecord[] {
  const restored: ActorRecord[] = [];
  for (const spec of restoredSpecs(saved.deployments)) {
    const d = newDeployment(spec, memory.reserve(spec));
    state.deployments.set(spec.name, d);
    const replicas = ownReplicas(spec);
    const mine = saved.actors.filter((x) => x.deployment === spec.name);
    // Replicas an update replaced serve on as such until the new spec's are READY: counted as
    // the new spec's, they had run the old model under it for good.
    for (const s of [...mine.filter((x) => !x.superseded).slice(0, replicas), ...mine.filter((x) => x.superseded)]) {
      const a = restoredActorRecord(s);
      state.actors.set(a.id, a);
      restored.push(a);
      d.actors.push(a);
    }
    const own = d.actors.filter((a) => !a.superseded).length;
    for (const i of freeReplicaIndices(d, replicas - own)) {
      const a = newActorRecord(d, i);
      state.actors.set(a.id, a);
      d.actors.push(a);
    }
  }
  return restored;
}
