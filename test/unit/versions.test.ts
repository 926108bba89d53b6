import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import { ownReplicas, pickVersion, versionMap, versionSpecs } from '../../head/control/versions.js';

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
      const name = pickVersion(spec);
      counts[name] = (counts[name] ?? 0) + 1;
    }
    assert.deepEqual(counts, { 'ab.v1': 70, 'ab.v2': 30 });
  }
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
