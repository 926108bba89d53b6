import type { ActorRecord, ClusterState } from './state.js';

/**
 * Takes an actor out of service: one that never ran is forgotten at once; a running one becomes
 * DRAINING (the router only picks READY replicas, so it takes no new calls), finishes the calls
 * it holds within `drainMs`, then its agent stops the process. `changed` runs when the actor's
 * state changes. Resolves once the stop was asked for, whatever the agent answered.
 */
export function retireActor(state: ClusterState, a: ActorRecord, drainMs: number, changed: () => void): Promise<void> {
  const node = a.nodeId ? state.nodes.get(a.nodeId) : undefined;
  if (!node?.channel || a.state === 'PENDING' || a.state === 'RESTARTING' || a.state === 'DEAD') {
    state.actors.delete(a.id);
    return Promise.resolve();
  }
  changed();
  a.state = 'DRAINING';
  a.reason = 'finishing in-flight calls before stopping';
  const started = Date.now();
  return (a.link?.whenIdle(drainMs) ?? Promise.resolve())
    .then(() => {
      const graceMs = Math.max(1000, drainMs - (Date.now() - started));
      return node.channel?.request({ type: 'stopActor', actorId: a.id, graceMs }, graceMs + 5000);
    })
    .then(
      () => undefined,
      () => undefined,
    );
}
