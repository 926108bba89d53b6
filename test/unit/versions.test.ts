import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import { ownReplicas, pickVersion, restoredSpecs, versionMap, versionSpecs } from '../../head/control/versions.js';

const spec = ModelDeploymentSchema.parse({
  name: 'ab',
  replicas: 2,
  versions: [
    { version: 'v1', model: 'a.onnx', weight: 70 },
    { version: 'v2', model: 'b.onnx', weight: 30, replicas: 1 },
    { version: 'v3', model: 'c.onnx', weight: 0 },
  ],
});

test('a spec with versions names the first version as its model and runs no replica itself', () => {
  assert.equal(spec.model, 'a.onnx');
  assert.equal(ownReplicas(spec), 0);
  assert.deepEqual(versionMap(spec), { v1: 'ab.v1', v2: 'ab.v2', v3: 'ab.v3' });
});

test("each version is a deployment of its own: the spec's settings, its model, its replicas, versionOf", () => {
  const [v1, v2, v3] = versionSpecs(spec);
  assert.deepEqual([v1!.name, v1!.model, v1!.replicas, v1!.versionOf, v1!.versions], ['ab.v1', 'a.onnx', 2, 'ab', undefined]);
  assert.deepEqual([v2!.name, v2!.replicas], ['ab.v2', 1]);
  assert.equal(v3!.cpus, spec.cpus);
});

test('the split gives each version exactly its share over every 100 calls, and none to weight 0', () => {
  for (let round = 0; round < 3; round++) {
    const counts: Record<string, number> = {};
    for (let i = 0; i < 100; i++) {
      const { deployment } = pickVersion(spec, () => true);
      counts[deployment] = (counts[deployment] ?? 0) + 1;
    }
    assert.deepEqual(counts, { 'ab.v1': 70, 'ab.v2': 30 });
  }
});

test('a version that cannot serve yet takes no call: its share goes to those that can, and it takes its share once it can', () => {
  let v2Serves = false;
  const serves = (deployment: string) => deployment !== 'ab.v2' || v2Serves;
  const picked = Array.from({ length: 50 }, () => pickVersion(spec, serves));
  assert.ok(picked.every((p) => p.deployment === 'ab.v1' && p.version === 'v1'));
  v2Serves = true;
  const counts: Record<string, number> = {};
  for (let i = 0; i < 100; i++) {
    const { version } = pickVersion(spec, serves);
    counts[version] = (counts[version] ?? 0) + 1;
  }
  assert.deepEqual(counts, { v1: 70, v2: 30 });
  // None can serve: split by the weights (the call waits for its version or fails saying why).
  assert.ok(['ab.v1', 'ab.v2'].includes(pickVersion(spec, () => false).deployment));
});

test("after a restart, version deployments are recomputed from their deployment's spec, not trusted as saved", () => {
  const [v1, v2] = versionSpecs(spec);
  const promoted = ModelDeploymentSchema.parse({
    name: 'p',
    model: 'a.onnx',
    versions: [{ version: 'new', model: 'b.onnx', weight: 100 }],
  });
  const stale = { ...v1!, model: 'stale.onnx', replicas: 5 };
  const orphan = { ...versionSpecs(promoted)[0]!, name: 'gone.v1', versionOf: 'gone' };
  const dropped = { ...v2!, name: 'p.old', versionOf: 'p' };
  const restored = restoredSpecs([spec, stale, orphan, dropped, promoted]);
  assert.deepEqual(
    restored.map((s) => [s.name, s.model, s.replicas, s.versionOf]),
    [
      ['ab', 'a.onnx', 2, undefined],
      ['ab.v1', 'a.onnx', 2, 'ab'],
      ['ab.v2', 'b.onnx', 1, 'ab'],
      ['ab.v3', 'c.onnx', 2, 'ab'],
      ['p', 'a.onnx', 1, undefined],
      ['p.new', 'b.onnx', 1, 'p'],
    ],
  );
  // The replica count an autoscaled version's autoscaler wrote is kept.
  const auto = ModelDeploymentSchema.parse({
    name: 'q',
    autoscale: { minReplicas: 0, maxReplicas: 4 },
    versions: [{ version: 'a', model: 'a.onnx', weight: 100 }],
  });
  const scaled = { ...versionSpecs(auto)[0]!, replicas: 3 };
  assert.equal(restoredSpecs([auto, scaled])[1]!.replicas, 3);
});

test('weights that do not sum to 100 and repeated versions are refused', () => {
  const bad = ModelDeploymentSchema.safeParse({ name: 'x', versions: [{ version: 'a', model: 'm', weight: 50 }] });
  assert.equal(bad.success, false);
  assert.match(JSON.stringify(bad.error!.issues), /sum to 100/);
  const twice = ModelDeploymentSchema.safeParse({
    name: 'x',
    versions: [
      { version: 'a', model: 'm', weight: 50 },
      { version: 'a', model: 'n', weight: 50 },
    ],
  });
  assert.equal(twice.success, false);
  assert.equal(ModelDeploymentSchema.safeParse({ name: 'x' }).success, false, 'a model or versions is required');
});
