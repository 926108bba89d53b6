import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { place } from '../../head/control/scheduler.js';
import type { ResourceRequest, Strategy } from '../../head/control/scheduler.js';
import type { ActorRecord, NodeRecord } from '../../head/state/records.js';

/** A node as an agent with `--simulate-gpus gpus --cpus cpus` registers it. */
function node(name: string, gpus: number, cpus = 8): NodeRecord {
  return {
    id: `id-${name}`,
    name,
    address: '127.0.0.1',
    state: 'ALIVE',
    resources: {
      cpus,
      memoryBytes: 64 * 2 ** 30,
      gpus: Array.from({ length: gpus }, (_, index) => ({
        index,
        uuid: `GPU-${name}-${index}`,
        name: 'Simulated GPU',
        memoryTotalMiB: 16384,
        memoryUsedMiB: null,
        utilizationPct: null,
        simulated: true,
      })),
    },
    agent: undefined,
    lastSeen: 0,
    usage: null,
  };
}

/** Places `replicas` actors one after the other, as the controller does, and says where each went. */
function deploy(
  nodes: NodeRecord[],
  actors: ActorRecord[],
  deployment: string,
  replicas: number,
  req: ResourceRequest,
  strategy: Strategy,
): string[] {
  const where: string[] = [];
  for (let i = 0; i < replicas; i++) {
    const placed = place(req, deployment, nodes, actors, strategy);
    assert.ok(placed.ok, placed.ok ? '' : placed.reason);
    actors.push({
      id: `${deployment}-${i}`,
      name: `${deployment}#${i}`,
      deployment,
      state: 'STARTING',
      reason: null,
      nodeId: placed.node.id,
      gpus: placed.gpus,
      gpuShare: placed.gpuShare,
      cpus: req.cpus,
      device: placed.gpus.length ? `gpu:${placed.gpus.join(',')}` : 'cpu',
      pid: null,
      restarts: 0,
      recentCrashes: [],
      secret: 'x',
      link: undefined,
      visibleDevices: null,
      gpuMemoryMiB: null,
      memoryBytes: 0,
      stats: null,
      usage: null,
    });
    where.push(placed.gpus.length ? `${placed.node.name}/gpu:${placed.gpus.join(',')}` : placed.node.name);
  }
  return where;
}

const half: ResourceRequest = { cpus: 1, gpus: 0.5 };

describe('scheduler: spread', () => {
  test('two half-GPU replicas on one node with two GPUs take one GPU each', () => {
    assert.deepEqual(deploy([node('local', 2)], [], 'mlp', 2, half, 'spread'), ['local/gpu:0', 'local/gpu:1']);
  });

  test('replicas go to different nodes first, then to different GPUs of a node', () => {
    const nodes = [node('a', 2), node('b', 2)];
    assert.deepEqual(deploy(nodes, [], 'mlp', 4, half, 'spread'), ['a/gpu:0', 'b/gpu:0', 'a/gpu:1', 'b/gpu:1']);
  });

  test('replicas share a GPU only once every GPU that fits holds one of them', () => {
    assert.deepEqual(deploy([node('local', 2)], [], 'mlp', 4, { cpus: 1, gpus: 0.25 }, 'spread'), [
      'local/gpu:0',
      'local/gpu:1',
      'local/gpu:0',
      'local/gpu:1',
    ]);
  });

  test('a node offering a GPU free of the deployment wins over one whose GPUs all hold a replica', () => {
    const nodes = [node('a', 1), node('b', 2)];
    const actors: ActorRecord[] = [];
    assert.deepEqual(deploy(nodes, actors, 'mlp', 3, half, 'spread'), ['a/gpu:0', 'b/gpu:0', 'b/gpu:1']);
  });

  test("another deployment's half GPU is filled before a whole GPU is opened, so whole GPUs stay free", () => {
    const nodes = [node('local', 2)];
    const actors: ActorRecord[] = [];
    deploy(nodes, actors, 'other', 1, half, 'spread');
    assert.deepEqual(deploy(nodes, actors, 'mlp', 1, half, 'spread'), ['local/gpu:0']);
    assert.deepEqual(deploy(nodes, actors, 'big', 1, { cpus: 1, gpus: 1 }, 'spread'), ['local/gpu:1']);
  });

  test('CPU replicas go to different nodes', () => {
    assert.deepEqual(deploy([node('a', 0), node('b', 0), node('c', 0)], [], 'mlp', 3, { cpus: 1, gpus: 0 }, 'spread'), ['a', 'b', 'c']);
  });

  test('whole-GPU replicas go to different nodes', () => {
    assert.deepEqual(deploy([node('a', 2), node('b', 2)], [], 'mlp', 2, { cpus: 1, gpus: 1 }, 'spread'), ['a/gpu:0', 'b/gpu:0']);
  });
});

describe('scheduler: pack', () => {
  test('half-GPU replicas share one GPU of one node before another is used', () => {
    const nodes = [node('a', 2), node('b', 2)];
    assert.deepEqual(deploy(nodes, [], 'mlp', 3, half, 'pack'), ['a/gpu:0', 'a/gpu:0', 'a/gpu:1']);
  });

  test('CPU replicas fill the busiest node that fits', () => {
    const nodes = [node('a', 0, 2), node('b', 0, 2)];
    assert.deepEqual(deploy(nodes, [], 'mlp', 3, { cpus: 1, gpus: 0 }, 'pack'), ['a', 'a', 'b']);
  });

  test('whole-GPU replicas fill one node first', () => {
    assert.deepEqual(deploy([node('a', 2), node('b', 2)], [], 'mlp', 2, { cpus: 1, gpus: 1 }, 'pack'), ['a/gpu:0', 'a/gpu:1']);
  });
});

describe('scheduler: what does not fit', () => {
  test('a failure names, node by node, what is missing and who holds the GPUs', () => {
    const nodes = [node('a', 1), node('c', 0)];
    const actors: ActorRecord[] = [];
    deploy(nodes, actors, 'mlp', 2, half, 'spread');
    const placed = place({ cpus: 1, gpus: 0.5 }, 'more', nodes, actors, 'spread');
    assert.equal(placed.ok, false);
    assert.equal(placed.ok ? '' : placed.reason, 'needs 0.5 GPUs and 1 CPU; a has 0 of 1 GPUs free (held by mlp#0, mlp#1); c has no GPU');
  });

  test('a node without GPUs says so first, whatever else it lacks: no freed CPU would place a GPU actor there', () => {
    const nodes = [node('cpu-only', 0, 2)];
    const actors: ActorRecord[] = [];
    deploy(nodes, actors, 'busy', 2, { cpus: 1, gpus: 0 }, 'spread');
    const placed = place({ cpus: 1, gpus: 1 }, 'on-gpu', nodes, actors, 'spread');
    assert.equal(placed.ok ? '' : placed.reason, 'needs 1 GPU and 1 CPU; cpu-only has no GPU');
    // Without a GPU asked for, the CPUs are what is missing.
    const cpu = place({ cpus: 1, gpus: 0 }, 'on-cpu', nodes, actors, 'spread');
    assert.equal(cpu.ok ? '' : cpu.reason, 'needs 1 CPU; cpu-only has 0 of 2 CPUs free');
  });
});
