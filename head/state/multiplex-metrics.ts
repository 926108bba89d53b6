import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { ModelTotals } from './deployment-stats.js';
import type { ClusterRecords } from './records.js';

/** How many live replicas of each multiplexed deployment hold each model now. */
function holders(state: ClusterRecords): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const a of state.actors.values()) {
    const models = a.state === 'DEAD' ? undefined : a.stats?.models;
    if (!models) continue;
    let of = out.get(a.deployment);
    if (!of) out.set(a.deployment, (of = new Map()));
    for (const [model, c] of Object.entries(models)) of.set(model, (of.get(model) ?? 0) + (c.loaded ? 1 : 0));
  }
  return out;
}

/**
 * A multiplexed deployment's models in /metrics: loads, hits (the call found its model loaded in
 * the replica that ran it), misses, evictions and failed loads per model, over every replica the
 * deployment has had (the head keeps a departed replica's counts, so counters never fall), and how
 * many replicas hold each now. Read from the replicas' reports (about once a second) at scrape time.
 */
export function registerMultiplexMetrics(state: ClusterRecords, registry: Registry): void {
  const registers = [registry];
  const counter = (name: string, help: string, key: keyof ModelTotals) =>
    new Counter({
      name,
      help,
      labelNames: ['model', 'member'],
      registers,
      collect() {
        this.reset();
        for (const [deployment, d] of state.deployments)
          for (const [member, c] of d.stats.models) this.inc({ model: deployment, member }, c[key]);
      },
    });
  counter('troupe_multiplex_loads_total', "Loads of a multiplexed deployment's model (member) into a replica.", 'loads');
  counter('troupe_multiplex_hits_total', 'Calls that found their model loaded in the replica that ran them.', 'hits');
  counter('troupe_multiplex_misses_total', 'Calls whose model had to be loaded (or was loading) in the replica that ran them.', 'misses');
  counter('troupe_multiplex_evictions_total', 'Times a model was taken out of a replica to make room for another.', 'evictions');
  counter(
    'troupe_multiplex_load_failures_total',
    'Loads of a model that failed (each remembered, and answered at once, until its back-off passes or its file changes).',
    'failedLoads',
  );
  new Gauge({
    name: 'troupe_multiplex_replicas_holding',
    help: 'Replicas of a multiplexed deployment that hold the model (member) loaded now.',
    labelNames: ['model', 'member'],
    registers,
    collect() {
      this.reset();
      for (const [deployment, models] of holders(state)) for (const [member, n] of models) this.set({ model: deployment, member }, n);
    },
  });
}
