import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { ClusterRecords } from './records.js';

type ModelCounts = { loads: number; hits: number; misses: number; loaded: boolean };

/** Each multiplexed deployment's model counts, summed over its live replicas' last reports. */
function perModel(state: ClusterRecords): Map<string, Map<string, ModelCounts & { replicas: number }>> {
  const out = new Map<string, Map<string, ModelCounts & { replicas: number }>>();
  for (const a of state.actors.values()) {
    const models = a.state === 'DEAD' ? undefined : a.stats?.models;
    if (!models) continue;
    let of = out.get(a.deployment);
    if (!of) out.set(a.deployment, (of = new Map()));
    for (const [model, c] of Object.entries(models)) {
      const sum = of.get(model) ?? { loads: 0, hits: 0, misses: 0, loaded: false, replicas: 0 };
      sum.loads += c.loads;
      sum.hits += c.hits;
      sum.misses += c.misses;
      sum.replicas += c.loaded ? 1 : 0;
      of.set(model, sum);
    }
  }
  return out;
}

/**
 * A multiplexed deployment's models in /metrics: loads, hits (the call found its model loaded in
 * the replica that ran it) and misses per model, and how many replicas hold each now. Read from the
 * replicas' reports (about once a second) at scrape time.
 */
export function registerMultiplexMetrics(state: ClusterRecords, registry: Registry): void {
  const registers = [registry];
  const counter = (name: string, help: string, key: 'loads' | 'hits' | 'misses') =>
    new Counter({
      name,
      help,
      labelNames: ['model', 'member'],
      registers,
      collect() {
        this.reset();
        for (const [deployment, models] of perModel(state))
          for (const [member, c] of models) this.inc({ model: deployment, member }, c[key]);
      },
    });
  counter('troupe_multiplex_loads_total', "Loads of a multiplexed deployment's model (member) into a replica.", 'loads');
  counter('troupe_multiplex_hits_total', 'Calls that found their model loaded in the replica that ran them.', 'hits');
  counter('troupe_multiplex_misses_total', 'Calls whose model had to be loaded (or was loading) in the replica that ran them.', 'misses');
  new Gauge({
    name: 'troupe_multiplex_replicas_holding',
    help: 'Replicas of a multiplexed deployment that hold the model (member) loaded now.',
    labelNames: ['model', 'member'],
    registers,
    collect() {
      this.reset();
      for (const [deployment, models] of perModel(state))
        for (const [member, c] of models) this.set({ model: deployment, member }, c.replicas);
    },
  });
}
