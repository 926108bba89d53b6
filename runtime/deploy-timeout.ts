import * as z from 'zod';
import { ACTOR_STATES } from './views.js';
import type { DeploymentView } from './views.js';

/**
 * A deploy waits for READY only this long unless told otherwise: a replica that cannot be placed
 * (no CPU left, no GPU at all) would otherwise hold the request open with nothing to show, while
 * the reason sits on the status page. Past the bound the caller gets each actor's state and reason.
 */
export const DEFAULT_DEPLOY_TIMEOUT_S = 60;
/** The longest one deploy request may wait (a client wanting longer asks again: deploying is idempotent). */
export const MAX_DEPLOY_TIMEOUT_S = 3600;

/** One actor a deploy is still waiting for, and why (PENDING: what the scheduler found missing). */
export const PendingActorSchema = z.object({
  actor: z.string(),
  state: z.enum(ACTOR_STATES),
  reason: z.string().nullable(),
  node: z.string().nullable(),
});
export type PendingActor = z.infer<typeof PendingActorSchema>;

/** Every actor of the deployment that is not READY yet. */
export function pendingActors(view: DeploymentView): PendingActor[] {
  return view.actors.filter((a) => a.state !== 'READY').map((a) => ({ actor: a.name, state: a.state, reason: a.reason, node: a.node }));
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))} s`;
}

/**
 * `1 of 2 replicas READY after 60 s; mlp#1 PENDING (needs 1 CPU; local has 0 of 2 CPUs free)`.
 * Actors in the same state for the same reason are named together, so 48 unplaceable replicas
 * make one clause.
 */
export function describeNotReady(view: DeploymentView, when = ''): string {
  const ready = view.actors.filter((a) => a.state === 'READY').length;
  const groups = new Map<string, { names: string[]; state: string; why: string | null }>();
  for (const p of pendingActors(view)) {
    // A placed actor without a reason (STARTING: loading its model) at least says where.
    const why = p.reason ?? (p.node ? `on ${p.node}` : null);
    const key = `${p.state}\0${why ?? ''}`;
    const group = groups.get(key) ?? { names: [], state: p.state, why };
    group.names.push(p.actor);
    groups.set(key, group);
  }
  const clauses = [...groups.values()].map((g) => `${g.names.join(', ')} ${g.state}${g.why ? ` (${g.why})` : ''}`);
  return `${ready} of ${view.replicas} replicas READY${when}${clauses.length ? `; ${clauses.join(', ')}` : ''}`;
}

/**
 * The message of TROUPE_ERR_DEPLOY_TIMEOUT (and of an HTTP 202 past the bound): every actor not
 * READY with its reason, and that nothing was undone, so nobody redeploys in a loop thinking it was.
 */
export function deployTimeoutMessage(
  what: { kind: 'deployment' | 'graph'; name: string },
  views: readonly DeploymentView[],
  waitedMs: number,
): string {
  if (what.kind === 'deployment') {
    const state = views[0] ? describeNotReady(views[0], ` after ${seconds(waitedMs)}`) : `not READY after ${seconds(waitedMs)}`;
    return `deployment '${what.name}': ${state}; it stays deployed and the head keeps placing and starting its replicas (undeploy it to give up)`;
  }
  const parts = views.filter((v) => v.state !== 'READY').map((v) => `'${v.name}' ${describeNotReady(v)}`);
  return (
    `graph '${what.name}' is not READY after ${seconds(waitedMs)}: ${parts.join('; ') || 'its deployments are still starting'}; ` +
    'its deployments stay and the head keeps placing and starting them, then makes the graph runnable'
  );
}
