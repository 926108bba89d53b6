import { TroupeError, newSecret } from '../../runtime/internal.js';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';
import { startActorMessage } from '../state/record-changes.js';

/**
 * Asks `node`'s agent to start actor `a` of `d` under a fresh secret (which shuts out any older
 * process of it). Its pid, and a failure to start, count only while the actor is still this start
 * (same secret, still STARTING on that node through that agent): a connection that dropped
 * meanwhile is settled elsewhere (a re-registration lists the actor, kept, or not, crashed; a lost
 * node restarts it). False when the node has no agent to ask.
 */
export function startOnNode(
  a: ActorRecord,
  d: DeploymentRecord,
  node: NodeRecord,
  hooks: { changed: () => void; failed: (error: TroupeError) => void },
): boolean {
  const agent = node.agent;
  if (!agent) return false;
  a.secret = newSecret();
  a.awaitingNode = null;
  const secret = a.secret;
  hooks.changed();
  agent.startActor(startActorMessage(a, d)).then(
    ({ pid }) => {
      if (a.secret === secret && (a.state === 'STARTING' || a.state === 'READY')) {
        a.pid = pid;
        hooks.changed();
      }
    },
    (err: unknown) => {
      if (a.secret !== secret || a.state !== 'STARTING' || a.nodeId !== node.id || node.agent !== agent) return;
      hooks.failed(err instanceof TroupeError ? err : new TroupeError('TROUPE_ERR_INTERNAL', String(err)));
    },
  );
  return true;
}
