import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { place, REASON_NODES, usageOf } from '../../head/control/scheduler.js';
import { keepChosenReplicas, leavesChosenReplicas, replicasAtLoad } from '../../head/control/replicas-at-load.js';
import { choosesReplicasAtLoad, needsNewActors, newDeployment } from '../../head/state/record-changes.js';
import type { ActorRecord, NodeRecord } from '../../head/state/records.js';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import type { ActorState, Gpu, NodeState } from '../../runtime/internal.js';

// What counts against a node's capacity, and the reasons placement gives when nothing fits.
// Which node and GPU a replica goes to under spread and pack: scheduler.test.ts.

const MiB = 2 ** 20;

function gpu(index: number): Gpu {
  return { index, uuid: `GPU-${index}`, name: 'sim', memoryTotalMiB: 16_000, memoryUsedMiB: null, utilizationPct: null, simulated: true };
}

function node(
  name: string,
  cpus: number,
  options: { gpus?: number; memoryMiB?: number; maxActors?: number; state?: NodeState } = {},
): NodeRecord {
  return {
    id: `id-${name}`,
    name,
    address: '127.0.0.1',
    state: options.state ?? 'ALIVE',
    resources: {
      cpus,
      memoryBytes: (options.memoryMiB ?? 64_000) * MiB,
      gpus: Array.from({ length: options.gpus ?? 0 }, (_, i) => gpu(i)),
      ...(options.maxActors !== undefined ? { maxActors: options.maxActors } : {}),
    },
    agent: undefined,
    lastSeen: 0,
    usage: null,
  };
}

let actorCount = 0;
function actor(
  on: NodeRecord,
  deployment: string,
  options: { cpus?: number; gpus?: number[]; gpuShare?: number; memoryMiB?: number; state?: ActorState } = {},
): ActorRecord {
  const n = actorCount++;
  return {
    id: `a${n}`,
    name: `${deployment}#${n}`,
    deployment,
    state: options.state ?? 'READY',
    reason: null,
    nodeId: on.id,
    gpus: options.gpus ?? [],
    gpuShare: options.gpuShare ?? 1,
    cpus: options.cpus ?? 1,
    device: 'cpu',
    pid: null,
    restarts: 0,
    recentCrashes: [],
    secret: 's',
    link: undefined,
    visibleDevices: null,
    gpuMemoryMiB: null,
    memoryBytes: (options.memoryMiB ?? 0) * MiB,
    stats: null,
    usage: null,
  };
}

const cpu = (cpus: number, memoryMiB = 0) => ({ cpus, gpus: 0, memoryBytes: memoryMiB * MiB });

function placedOn(result: ReturnType<typeof place>): string {
  assert.ok(result.ok, `not placed: ${result.ok ? '' : result.reason}`);
  return result.node.name;
}

function reasonOf(result: ReturnType<typeof place>): string {
  assert.ok(!result.ok, `placed on ${result.ok ? result.node.name : ''}`);
  return result.reason;
}

describe('place: what counts against a node', () => {
  test('among nodes holding as many replicas of the deployment, the least loaded wins', () => {
    const [a, b] = [node('a', 8), node('b', 8)];
    const actors = [actor(a, 'mlp', { cpus: 3 }), actor(b, 'mlp', { cpus: 1 })];
    assert.equal(placedOn(place(cpu(1), 'other', [a, b], actors)), 'b');
  });

  test('only ALIVE nodes take actors', () => {
    const nodes = [node('s', 8, { state: 'SUSPECT' }), node('d', 8, { state: 'DEAD' }), node('ok', 1)];
    assert.equal(placedOn(place(cpu(1), 'mlp', nodes, [])), 'ok');
    assert.equal(reasonOf(place(cpu(1), 'mlp', nodes.slice(0, 2), [])), 'needs 1 CPU; no node is alive');
  });

  test('actors that hold nothing (PENDING, DEAD) or sit on other nodes do not count against a node', () => {
    const [a, b] = [node('a', 2), node('b', 2)];
    const actors = [
      actor(a, 'x', { cpus: 2, state: 'PENDING' }),
      actor(a, 'x', { cpus: 2, state: 'DEAD' }),
      actor(b, 'x', { cpus: 1, state: 'STARTING' }),
    ];
    const usage = usageOf(a, actors, 'x');
    assert.deepEqual([usage.cpusUsedMilli, usage.actors, usage.sameDeployment], [0, 0, 0]);
    assert.deepEqual([usageOf(b, actors, 'x').cpusUsedMilli, usageOf(b, actors, 'x').sameDeployment], [1000, 1]);
    assert.equal(placedOn(place(cpu(2), 'y', [a, b], actors)), 'a');
  });

  test('DRAINING actors still hold their share until they stop', () => {
    const a = node('a', 2);
    assert.match(reasonOf(place(cpu(1), 'y', [a], [actor(a, 'x', { cpus: 2, state: 'DRAINING' })])), /a has 0 of 2 CPUs free/);
  });

  test('GPU shares that add up to one fit exactly (no float drift refuses the last third)', () => {
    const g = node('g', 16, { gpus: 1 });
    const actors = [actor(g, 'x', { gpus: [0], gpuShare: 1 / 3 }), actor(g, 'x', { gpus: [0], gpuShare: 1 / 3 })];
    assert.equal(placedOn(place({ cpus: 1, gpus: 1 / 3 }, 'x', [g], actors)), 'g');
    assert.match(reasonOf(place({ cpus: 1, gpus: 0.5 }, 'x', [g], actors)), /g has 0 of 1 GPUs free/);
  });
});

describe('place: reasons a person can act on, node by node', () => {
  test('CPUs, memory and the actor cap each name what is missing', () => {
    const small = node('small', 1);
    const tight = node('tight', 8, { memoryMiB: 300 });
    const capped = node('capped', 8, { maxActors: 1 });
    const actors = [actor(small, 'x'), actor(tight, 'x', { memoryMiB: 200 }), actor(capped, 'x')];
    const reason = reasonOf(place(cpu(1, 150), 'y', [small, tight, capped], actors));
    assert.equal(
      reason,
      'needs 1 CPU; small has 0 of 1 CPUs free; tight has 100 MiB of 300 MiB memory free, a replica reserves 150 MiB; node capped holds its 1 actor (--max-actors)',
    );
  });

  test(`a refusal names the first ${REASON_NODES} nodes and counts the rest`, () => {
    const nodes = Array.from({ length: REASON_NODES + 5 }, (_, i) => node(`n${i}`, 1));
    const actors = nodes.map((n) => actor(n, 'x'));
    const reason = reasonOf(place(cpu(1), 'y', nodes, actors));
    assert.equal(reason.match(/has 0 of 1 CPUs free/g)?.length, REASON_NODES);
    assert.match(reason, /n19 has 0 of 1 CPUs free; and 5 more nodes short of it$/);
  });

  test('the default actor cap is 8 per CPU', () => {
    const n = node('n', 0.5);
    const actors = Array.from({ length: 4 }, () => actor(n, 'x', { cpus: 0.05 }));
    assert.match(reasonOf(place(cpu(0.05), 'x', [n], actors)), /node n holds its 4 actors \(--max-actors\)/);
    assert.equal(placedOn(place(cpu(0.05), 'x', [n], actors.slice(1))), 'n');
  });
});

describe('place: CPUs counted exactly', () => {
  // Shares a spec may name (thousandths), summed in any order: the free CPUs a refusal names are
  // the exact difference as a person writes it, and a replica fits exactly when that covers it.
  test('a node filled with shares of thousandths refuses at the exact remainder, named exactly (fast-check, seeded)', () => {
    const seed = Number(process.env.FC_SEED ?? 46);
    const share = fc.integer({ min: 50, max: 1500 }).map((m) => m / 1000);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(share, { maxLength: 40 }), share, (cpus, held, asked) => {
        const n = node('n', cpus, { maxActors: 1000 });
        const actors: ActorRecord[] = [];
        for (const c of held) if (place(cpu(c), 'x', [n], actors).ok) actors.push(actor(n, 'x', { cpus: c }));
        const freeMilli = cpus * 1000 - actors.reduce((sum, a) => sum + Math.round(a.cpus * 1000), 0);
        const result = place(cpu(asked), 'y', [n], actors);
        assert.equal(result.ok, freeMilli >= Math.round(asked * 1000));
        if (!result.ok) {
          const free = /n has (\S+) of \d+ CPUs free/.exec(result.reason)?.[1];
          assert.equal(free, String(freeMilli / 1000), result.reason);
          assert.match(free!, /^\d+(\.\d{1,3})?$/);
        }
      }),
      { seed, numRuns: 300 },
    );
  });

  test('0.1 + 0.25 of 0.7 leaves 0.35 free, not 0.34999999999999987', () => {
    const n = node('n', 0.7);
    const reason = reasonOf(place(cpu(0.4), 'y', [n], [actor(n, 'x', { cpus: 0.1 }), actor(n, 'x', { cpus: 0.25 })]));
    assert.match(reason, /n has 0.35 of 0.7 CPUs free/);
  });
});

describe('replicas chosen at load (head/control/replicas-at-load.ts)', () => {
  const spec = (input: Record<string, unknown> = {}) => ModelDeploymentSchema.parse({ name: 'cnn', model: 'mobilenet.onnx', ...input });

  test('only a model that names none of replicas, threads, instances, CPUs, autoscaling or versions has its count chosen', () => {
    assert.equal(choosesReplicasAtLoad(spec()), true);
    for (const named of [
      { replicas: 1 },
      { threads: 1 },
      { instances: 2 },
      { cpus: 0.5 },
      { autoReplicas: false },
      { autoscale: { minReplicas: 1, maxReplicas: 2 } },
    ])
      assert.equal(choosesReplicasAtLoad(spec(named)), false, JSON.stringify(named));
    assert.equal(choosesReplicasAtLoad(spec({ replicas: 3, autoReplicas: true })), true, 'a count chosen before, kept in the spec');
    assert.equal(choosesReplicasAtLoad(spec({ kind: 'class', model: 'counter.js#Counter' })), false);
  });

  test('a spec says autoReplicas only where the head may choose, and refuses it where something else sets the count or layout', () => {
    for (const other of [{ kind: 'class', model: 'counter.js#Counter' }, { threads: 2 }, { cpus: 0.5 }, { model: 'p.graph.json' }]) {
      assert.equal(spec(other).autoReplicas, undefined, `left out where it cannot apply: ${JSON.stringify(other)}`);
      const refused = ModelDeploymentSchema.safeParse({ name: 'cnn', model: 'mobilenet.onnx', ...other, autoReplicas: true });
      assert.equal(refused.success, false, JSON.stringify(other));
      assert.match(
        refused.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('\n'),
        /^autoReplicas: autoReplicas \(the head choosing/m,
      );
    }
    assert.equal(
      ModelDeploymentSchema.safeParse({ name: 'cnn', model: 'm.onnx', autoReplicas: true, autoscale: { minReplicas: 1, maxReplicas: 2 } })
        .success,
      false,
    );
    assert.equal(spec({ autoReplicas: false }).autoReplicas, undefined);
  });

  test('as many more as fit beside what the nodes hold, never fewer than it runs', () => {
    const d = newDeployment(spec(), 0);
    const a = node('a', 4);
    const b = node('b', 2);
    const held = [actor(a, 'cnn'), actor(a, 'other'), actor(b, 'other', { cpus: 1.5 })];
    // a: 2 of 4 CPUs free; b: 0.5 free. One replica runs (the first, on a).
    assert.deepEqual(replicasAtLoad(d, 4, [a, b], held).replicas, 3);
    assert.match(replicasAtLoad(d, 4, [a, b], held).why, /^3 replicas chosen at load: .*; 1 more would not fit/);
    assert.deepEqual(replicasAtLoad(d, 2, [a, b], held), {
      replicas: 2,
      why: '2 replicas chosen at load: its replica measured the model and asked for 2 (one per core, each a session of one thread)',
    });
    const full = [...held, actor(a, 'other', { cpus: 2 })];
    assert.equal(replicasAtLoad(d, 4, [a, b], full).replicas, 1, 'none fit: the one running serves');
    assert.equal(replicasAtLoad({ ...d, spec: { ...d.spec, replicas: 3 } }, 2, [a, b], held).replicas, 3);
  });

  test('the same spec again keeps the count chosen; a count named, or another model, does not', () => {
    const chosen = { ...spec(), replicas: 2 };
    assert.equal(keepChosenReplicas(chosen, spec()).replicas, 2);
    assert.equal(keepChosenReplicas(chosen, spec({ replicas: 1 })).replicas, 1);
    assert.equal(keepChosenReplicas(chosen, spec({ batch: { maxSize: 4 } })).replicas, 2, 'an update of the same model keeps it');
    assert.equal(keepChosenReplicas(chosen, spec({ model: 'other.onnx' })).replicas, 1);
    assert.equal(keepChosenReplicas(undefined, spec()).replicas, 1);
    const d = { ...newDeployment(chosen, 0), actors: [actor(node('a', 2), 'cnn')] };
    assert.equal(leavesChosenReplicas(d, spec({ replicas: 2 })), false, 'a cheap model: its replicas are as a count named would have them');
    d.actors[0]!.layout = {
      instances: 1,
      threads: 1,
      batchMaxSize: 1,
      inferenceThread: false,
      replicasWanted: 2,
      chosen: 'auto',
      reason: '',
    };
    assert.equal(leavesChosenReplicas(d, spec({ replicas: 2 })), true, "a replica of a count named holds the host's cores in sessions");
    assert.equal(leavesChosenReplicas(d, spec()), false);
    assert.equal(needsNewActors(chosen, spec({ replicas: 2 })), false);
  });
});
