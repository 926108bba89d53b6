import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ActorsByNode } from '../../head/control/actors-by-node.js';
import { place } from '../../head/control/scheduler.js';
import type { Strategy } from '../../head/control/scheduler.js';
import type { ActorRecord, NodeRecord } from '../../head/state/records.js';
import type { Gpu } from '../../runtime/internal.js';

// A scheduling pass places many actors against one ActorsByNode (grouped once, each node's usage
// kept until an actor lands on it). It must choose exactly what placing each actor against the
// whole cluster's actor list, scanned afresh, chooses: same node, same GPUs, same refusals.

function gpu(index: number): Gpu {
  return { index, uuid: `GPU-${index}`, name: 'sim', memoryTotalMiB: 16_000, memoryUsedMiB: null, utilizationPct: null, simulated: true };
}

function node(i: number, gpus: number, cpus: number): NodeRecord {
  return {
    id: `id-${i}`,
    name: `n${String(i).padStart(2, '0')}`,
    address: '127.0.0.1',
    state: 'ALIVE',
    resources: { cpus, memoryBytes: 2 ** 36, gpus: Array.from({ length: gpus }, (_, g) => gpu(g)) },
    agent: undefined,
    lastSeen: 0,
    usage: null,
  };
}

function pending(n: number, deployment: string, cpus: number): ActorRecord {
  return {
    id: `a${n}`,
    name: `${deployment}#${n}`,
    deployment,
    state: 'PENDING',
    reason: null,
    nodeId: null,
    gpus: [],
    gpuShare: 1,
    cpus,
    device: 'cpu',
    pid: null,
    restarts: 0,
    recentCrashes: [],
    secret: 's',
    link: undefined,
    visibleDevices: null,
    gpuMemoryMiB: null,
    memoryBytes: 0,
    stats: null,
    usage: null,
  };
}

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Deployment {
  name: string;
  gpus: number;
  cpus: number;
  strategy: Strategy;
}

/** Places `count` actors of the deployments in turn (runs of up to `longestRun` of one, as a pass does), returning where each went. */
function placeAll(nodes: NodeRecord[], deployments: Deployment[], count: number, seed: number, shared: boolean, longestRun = 6): string[] {
  const next = random(seed);
  const actors: ActorRecord[] = [];
  const index = new ActorsByNode([]);
  const where: string[] = [];
  for (let i = 0; i < count;) {
    const d = deployments[Math.floor(next() * deployments.length)]!;
    const run = 1 + Math.floor(next() * longestRun);
    for (let r = 0; r < run && i < count; r++, i++) {
      const a = pending(i, d.name, d.cpus);
      actors.push(a);
      const placed = place({ cpus: d.cpus, gpus: d.gpus }, d.name, nodes, shared ? index : actors, d.strategy);
      if (!placed.ok) {
        where.push(`refused: ${placed.reason}`);
        continue;
      }
      Object.assign(a, { nodeId: placed.node.id, gpus: placed.gpus, gpuShare: placed.gpuShare, state: 'STARTING' });
      index.add(a);
      where.push(`${placed.node.name}/${placed.gpus.join(',')}`);
    }
  }
  return where;
}

describe('placing through one ActorsByNode chooses what scanning every actor chooses', () => {
  const deployments: Deployment[] = [
    { name: 'whole', gpus: 1, cpus: 1, strategy: 'spread' },
    { name: 'half', gpus: 0.5, cpus: 0.5, strategy: 'spread' },
    { name: 'third-packed', gpus: 1 / 3, cpus: 0.25, strategy: 'pack' },
    { name: 'two', gpus: 2, cpus: 2, strategy: 'spread' },
    { name: 'cpu-only', gpus: 0, cpus: 1.5, strategy: 'pack' },
  ];

  for (const seed of [1, 2, 3, 4, 5]) {
    test(`seed ${seed}: 12 nodes of mixed sizes filled past capacity`, () => {
      const nodes = Array.from({ length: 12 }, (_, i) => node(i, i % 3 === 0 ? 0 : 4 + (i % 2) * 4, 4 + (i % 4) * 4));
      const fresh = placeAll(nodes, deployments, 160, seed, false);
      const grouped = placeAll(nodes, deployments, 160, seed, true);
      assert.deepEqual(grouped, fresh);
      // Past capacity: some were refused, with the same node-by-node reasons.
      assert.ok(fresh.some((w) => w.startsWith('refused')));
    });
  }
});

describe('one ranking per request, re-ranking only the node an actor landed on', () => {
  test('300 nodes, long runs of each deployment, one node SUSPECT: the same choices as a fresh scan', () => {
    const deployments: Deployment[] = [
      { name: 'whole', gpus: 1, cpus: 1, strategy: 'spread' },
      { name: 'quarter', gpus: 0.25, cpus: 0.25, strategy: 'spread' },
      { name: 'packed', gpus: 0.5, cpus: 0.5, strategy: 'pack' },
    ];
    const nodes = Array.from({ length: 300 }, (_, i) => node(i, 2 + (i % 3) * 2, 8));
    // Not ALIVE: it takes no actors, whichever way placement looks nodes up.
    nodes[7]!.state = 'SUSPECT';
    const fresh = placeAll(nodes, deployments, 2600, 9, false, 120);
    const grouped = placeAll(nodes, deployments, 2600, 9, true, 120);
    assert.deepEqual(grouped, fresh);
    assert.ok(!fresh.some((w) => w.startsWith('n07/')));
    assert.ok(fresh.some((w) => w.startsWith('refused')));
  });
});
