import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ActorStats } from '../../runtime/internal.js';
import { DeploymentStats } from '../../head/state/deployment-stats.js';
import { ClusterSampler } from '../../head/status/sampler.js';
import { ClusterState } from '../../head/state/cluster-state.js';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../../head/state/records.js';

const stats = (batches: number, rows: number, computeMs = 0, queued = 0): ActorStats => ({
  calls: rows,
  batches,
  rows,
  expired: 0,
  failed: 0,
  computeMs,
  queueMs: 0,
  queued,
});

/** A cluster with one node (one simulated GPU) and one deployment of one actor on it: only the fields the sampler reads. */
function cluster() {
  const state = new ClusterState();
  const node = {
    id: 'n1',
    name: 'node-a',
    state: 'ALIVE',
    resources: {
      cpus: 4,
      memoryBytes: 0,
      gpus: [
        { index: 0, uuid: 'GPU-sim-0', name: 'Simulated GPU', memoryTotalMiB: 16384, memoryUsedMiB: 0, utilizationPct: 0, simulated: true },
      ],
    },
  } as unknown as NodeRecord;
  state.nodes.set(node.id, node);
  const actor = {
    id: 'a1',
    name: 'mlp#0',
    deployment: 'mlp',
    state: 'READY',
    nodeId: 'n1',
    gpus: [0],
    gpuShare: 0.5,
    pid: 100,
    stats: null,
  } as unknown as ActorRecord;
  const dispatcher = { queued: 0 };
  const deployment = { spec: { name: 'mlp' }, actors: [actor], dispatcher, stats: new DeploymentStats() } as unknown as DeploymentRecord;
  state.deployments.set('mlp', deployment);
  return { state, actor, dispatcher, deployment };
}

describe("ClusterSampler: per-second series from the head's running totals", () => {
  test('requests/s from calls finished in the interval, p50/p99 of those calls only, queue in the head and the actors', () => {
    const { state, actor, dispatcher, deployment } = cluster();
    const sampler = new ClusterSampler(state);
    sampler.record(10_000);
    for (const ms of [1, 2, 3, 4, 100]) deployment.stats.record(ms);
    deployment.stats.record(5, 'TROUPE_ERR_OVERLOADED');
    dispatcher.queued = 3;
    actor.stats = stats(0, 0, 0, 2);
    sampler.record(12_000);
    const s = sampler.store;
    assert.equal(s.latest('rps|mlp'), 3, '6 calls in 2 s, the failed one included');
    assert.equal(s.latest('p50|mlp'), 3);
    assert.equal(s.latest('p99|mlp'), 100);
    assert.equal(s.latest('queue|mlp'), 5);
    sampler.record(13_000);
    assert.equal(s.latest('rps|mlp'), 0);
    assert.equal(s.latest('p50|mlp'), null, 'no call finished: no latency, rather than an old one');
  });

  test("mean batch size from the actors' report deltas; a report counts once; a restarted process counts from zero", () => {
    const { state, actor } = cluster();
    const sampler = new ClusterSampler(state);
    const batch = () => sampler.store.latest('batch|mlp');
    actor.stats = stats(2, 8);
    sampler.record(1000);
    assert.equal(batch(), 4, 'a first report counts whole');
    actor.stats = stats(5, 11);
    sampler.record(2000);
    assert.equal(batch(), 1);
    sampler.record(3000);
    assert.equal(batch(), null, 'the same report again is nothing new');
    // The process crashed: its last report stays on the record while the next one starts.
    actor.pid = 200;
    sampler.record(4000);
    assert.equal(batch(), null, "the dead process's totals are not counted again");
    actor.stats = stats(1, 6);
    sampler.record(5000);
    assert.equal(batch(), 6, "the new process's first report counts whole");
  });

  test("a simulated GPU's utilisation is the share of the interval its actors spent computing", () => {
    const { state, actor } = cluster();
    const sampler = new ClusterSampler(state);
    actor.stats = stats(1, 1, 0);
    sampler.record(1000);
    actor.stats = stats(2, 2, 250);
    sampler.record(2000);
    assert.equal(sampler.store.latest('util|node-a/gpu0'), 25);
    assert.equal(sampler.store.latest('mem|node-a/gpu0'), null, 'a simulated GPU has no measured memory');
  });
});
