import type { Clock } from './clock.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { ActorRecord } from '../state/records.js';

/**
 * Takes an actor out of service: one that never ran is forgotten at once; a running one becomes
 * DRAINING (the router only picks READY replicas, so it takes no new calls), finishes the calls
 * it holds within `drainMs`, then its agent stops the process. `changed` runs when the actor's
 * state changes. Resolves once the stop was asked for, whatever the agent answered.
 */
export function retireActor(state: ClusterState, a: ActorRecord, drainMs: number, changed: () => void, clock: Clock): Promise<void> {
  const node = a.nodeId ? state.nodes.get(a.nodeId) : undefined;
  if (!node?.agent || a.state === 'PENDING' || a.state === 'RESTARTING' || a.state === 'DEAD') {
    state.actors.delete(a.id);
    return Promise.resolve();
  }
  changed();
  a.state = 'DRAINING';
  a.reason = 'finishing in-flight calls before stopping';
  const started = clock.now();
  return (a.link?.whenIdle(drainMs) ?? Promise.resolve())
    .then(() => {
      const graceMs = Math.max(1000, drainMs - (clock.now() - started));
      // The node's connection now, which may be a newer one than when the drain began.
      return node.agent?.stopActor(a.id, graceMs);
    })
    .then(
      () => undefined,
      () => undefined,
    );
}
