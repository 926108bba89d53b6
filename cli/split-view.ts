import type { DeploymentView } from '../runtime/internal.js';

/**
 * A deployment split between versions runs no replica of its own: each version is a deployment
 * of its own (`ranker.v1`) that does. Shown as its own entry alone it read "0/1 READY · no actors
 * yet", or READY with nothing; these lines show what its versions run instead.
 */
export type ViewsByName = ReadonlyMap<string, DeploymentView>;

export function isSplit(view: DeploymentView): view is DeploymentView & { versions: NonNullable<DeploymentView['versions']> } {
  return view.versions !== undefined && view.versions.length > 0;
}

const readyOf = (view: DeploymentView) => view.actors.filter((a) => a.state === 'READY').length;

/** READY replicas and replicas wanted: a split's are its versions' together. */
export function replicaCounts(view: DeploymentView, byName: ViewsByName): { ready: number; replicas: number } {
  if (!isSplit(view)) return { ready: readyOf(view), replicas: view.replicas };
  let ready = 0;
  let replicas = 0;
  for (const v of view.versions) {
    const runs = byName.get(v.deployment);
    ready += runs ? readyOf(runs) : 0;
    replicas += runs?.replicas ?? 0;
  }
  return { ready, replicas };
}

/** `v1 90% (ranker.v1 1/1 READY), v2 10% (ranker.v2 0/1 READY)`: each version, its share, its replicas. */
export function versionsLine(view: DeploymentView, byName: ViewsByName): string {
  if (!isSplit(view)) return '';
  return view.versions
    .map((v) => {
      const runs = byName.get(v.deployment);
      // Without the version's own view (not fetched, or not made yet) its state is what the split says.
      const counts = runs ? `${readyOf(runs)}/${runs.replicas} READY` : v.state;
      return `${v.version} ${v.weight}% (${v.deployment} ${counts})`;
    })
    .join(', ');
}
