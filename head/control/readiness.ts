import type { ClusterState } from '../state/cluster-state.js';

export type Readiness = { ready: true; nodes: number } | { ready: false; nodes: number; reason: string };

/** What `/readyz`, `/v2/health/ready` (when not ready) and the status page say: one shape for all three. */
export interface ReadinessBody {
  status: 'ready' | 'not ready';
  ready: boolean;
  /** Nodes ALIVE now. */
  nodes: number;
  /** Why not, in words a person can act on; absent when ready. */
  reason?: string;
}

/**
 * Whether the head, as a server, should be sent traffic: it is not draining and some node is
 * ALIVE to run work. `/readyz`, `/v2/health/ready` and the status page's summary all answer from
 * this, so they never disagree. It does not ask whether every deployment is READY: one deployment
 * that cannot start would otherwise take every healthy one out of a load balancer. Each model
 * says that for itself at `/v2/models/{name}/ready`.
 */
export function serverReadiness(state: ClusterState, draining: boolean): Readiness {
  const nodes = [...state.nodes.values()].filter((n) => n.state === 'ALIVE').length;
  if (draining) return { ready: false, nodes, reason: 'the head is shutting down and takes no new work' };
  if (nodes === 0) return { ready: false, nodes, reason: `no node is ALIVE (${state.nodes.size} known)` };
  return { ready: true, nodes };
}

export function readinessBody(readiness: Readiness): ReadinessBody {
  return readiness.ready ? { status: 'ready', ready: true, nodes: readiness.nodes } : { status: 'not ready', ...readiness };
}
