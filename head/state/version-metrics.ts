import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import { versionDeploymentName } from '../control/versions.js';
import type { ClusterRecords, DeploymentRecord } from './records.js';

/** Each deployment split between versions, with each version's deployment (absent while it is being made). */
function* versionsOf(
  state: ClusterRecords,
): Generator<{ d: DeploymentRecord; version: string; weight: number; runs: DeploymentRecord | undefined }> {
  for (const d of state.deployments.values())
    for (const v of d.spec.versions ?? [])
      yield { d, version: v.version, weight: v.weight, runs: state.deployments.get(versionDeploymentName(d.spec.name, v.version)) };
}

/**
 * Deployments split between versions in /metrics, read from the specs and the versions' own
 * statistics at scrape time: each version's weight and READY replicas, whether it was promoted,
 * and the calls it ran (its deployment's, which only grow while the version is listed).
 */
export function registerVersionMetrics(state: ClusterRecords, registry: Registry): void {
  const registers = [registry];
  const labelNames = ['model', 'version'] as const;
  new Gauge({
    name: 'troupe_version_weight_percent',
    help: "A version's weight: the percent of its deployment's calls it is meant to take.",
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const v of versionsOf(state)) this.set({ model: v.d.spec.name, version: v.version }, v.weight);
    },
  });
  new Gauge({
    name: 'troupe_version_ready_replicas',
    help: "A version's READY replicas.",
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const v of versionsOf(state))
        this.set({ model: v.d.spec.name, version: v.version }, v.runs?.actors.filter((a) => a.state === 'READY').length ?? 0);
    },
  });
  new Gauge({
    name: 'troupe_version_promoted',
    help: 'Whether the version was promoted (1): it takes every call, and a rollback restores the split it came from.',
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const v of versionsOf(state)) this.set({ model: v.d.spec.name, version: v.version }, v.d.spec.promotedFrom ? 1 : 0);
    },
  });
  new Counter({
    name: 'troupe_version_requests_total',
    help: 'Calls a version ran (answered or failed), from the split or pinned to it.',
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const v of versionsOf(state)) {
        const s = v.runs?.stats;
        if (!s) continue;
        let failed = 0;
        for (const n of s.failed.values()) failed += n;
        this.inc({ model: v.d.spec.name, version: v.version }, s.ok + failed);
      }
    },
  });
}
