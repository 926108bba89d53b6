import type { Head } from '../head-options.js';
import type { DurableStore, SavedState } from './durable.js';

/** What a head brought back from its state file, as `Head.restored` says it (undefined: nothing). */
export function restoredFrom(store: DurableStore | undefined, saved: SavedState | undefined): Head['restored'] {
  if (!store || !saved || (saved.deployments.length === 0 && saved.graphs.size === 0)) return undefined;
  return {
    file: store.file,
    deployments: saved.deployments.filter((d) => !d.versionOf).map((d) => d.name),
    graphs: [...saved.graphs.keys()],
  };
}
