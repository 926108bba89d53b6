import type { Logger } from '../../runtime/internal.js';
import type { RunningActorReport } from './controller-options.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { NodeRecord } from '../state/records.js';

/**
 * Matches the actors an agent lists when it (re)registers to this head's records. Those placed
 * on this node, or restored from the state file for a node of this name (after a head restart),
 * are kept: the latter are adopted, same process, model not reloaded. Every other listed actor is
 * a duplicate or a leftover, and its id is returned to be stopped.
 */
export function adoptListed(
  state: ClusterState,
  node: NodeRecord,
  running: readonly RunningActorReport[],
  log: Logger,
): { listed: Set<string>; stop: string[] } {
  const stop: string[] = [];
  const listed = new Set<string>();
  for (const r of running) {
    const a = state.actors.get(r.actorId);
    const live = a !== undefined && (a.state === 'STARTING' || a.state === 'READY');
    if (live && a.nodeId === node.id) {
      listed.add(a.id);
      a.pid = r.pid;
    } else if (live && a.nodeId === null && a.awaitingNode === node.name) {
      listed.add(a.id);
      a.nodeId = node.id;
      a.pid = r.pid;
      a.awaitingNode = null;
      if (a.state === 'STARTING') a.reason = 'adopted after a head restart; waiting for it to rejoin';
      log.info({ actor: a.name, node: node.name, pid: r.pid }, 'adopted a running actor');
      state.events.add('actor-adopted', `${a.name} adopted on ${node.name} (pid ${r.pid})`);
    } else stop.push(r.actorId);
  }
  return { listed, stop };
}
