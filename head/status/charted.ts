import { ALL } from './sampler.js';

/** Lines a chart can tell apart; past it the page gets the cluster's aggregate line instead. */
export const CHART_SUBJECTS_MAX = 12;

/** Metrics per deployment, and per GPU. */
const FAMILIES = [
  ['rps', 'p50', 'p99', 'queue', 'batch'],
  ['util', 'mem'],
] as const;

type Mode = 'none' | 'each' | 'all';

/**
 * Which series the page's charts get: per deployment (or per GPU) while there are a few, the
 * cluster's aggregate (`<metric>|*`) once there are more than a chart can tell apart, nothing while
 * there are none. `key` names the choice: when it changes, a page needs the whole history of the
 * series it now gets.
 */
export function chartedSeries(subjects: { deployments: number; gpus: number }): { key: string; include: (id: string) => boolean } {
  const modes: Mode[] = [subjects.deployments, subjects.gpus].map((n) => (n === 0 ? 'none' : n <= CHART_SUBJECTS_MAX ? 'each' : 'all'));
  const modeOf = new Map<string, Mode>();
  FAMILIES.forEach((family, i) => family.forEach((m) => modeOf.set(m, modes[i]!)));
  return {
    key: modes.join(','),
    include: (id) => {
      const bar = id.indexOf('|');
      const mode = modeOf.get(id.slice(0, bar)) ?? 'none';
      return id.slice(bar + 1) === ALL ? mode === 'all' : mode === 'each';
    },
  };
}
