import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import type { ModelDeploymentInput } from '../../runtime/internal.js';
import { specChanges } from '../../head/control/deployments.js';

const spec = (input: Partial<ModelDeploymentInput>) => ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', ...input });

test('the same spec, with defaults given or left out, is no change', () => {
  assert.deepEqual(specChanges(spec({}), spec({ cpus: 1, autoReplicas: true })), []);
  // A count named pins it: the head no longer chooses it at load.
  assert.deepEqual(specChanges(spec({}), spec({ replicas: 1 })), ['autoReplicas']);
  assert.deepEqual(specChanges(spec({ replicas: 1 }), spec({ replicas: 1, autoReplicas: false })), []);
  // No batch leaves it to the replica (actors/auto-layout.ts): batching named off is a change.
  assert.deepEqual(specChanges(spec({}), spec({ batch: { maxSize: 1 } })), ['batch']);
});

test('each key that differs is named, nested values compared whole', () => {
  assert.deepEqual(specChanges(spec({ cpus: 0.25 }), spec({ cpus: 0.5, batch: { maxSize: 8 } })), ['batch', 'cpus']);
  assert.deepEqual(specChanges(spec({}), spec({ memory: '1Gi' })), ['memory']);
  assert.deepEqual(specChanges(spec({ memory: '1Gi' }), spec({})), ['memory']);
});

test("an autoscaled deployment's replica count is the autoscaler's: the same spec again is no change, another autoscale is", () => {
  const autoscale = { minReplicas: 1, maxReplicas: 4 };
  const scaled = { ...spec({ autoscale }), replicas: 3 };
  assert.deepEqual(specChanges(scaled, spec({ autoscale })), []);
  assert.deepEqual(specChanges(scaled, spec({ autoscale: { minReplicas: 1, maxReplicas: 8 } })), ['autoscale', 'replicas']);
  assert.deepEqual(specChanges(spec({ replicas: 3 }), spec({})), ['autoReplicas', 'replicas']);
});

test("a count the head chose at load is the head's: the same spec again is no change, a named count is", () => {
  const chosen = { ...spec({}), replicas: 2 };
  assert.equal(chosen.autoReplicas, true);
  assert.deepEqual(specChanges(chosen, spec({})), []);
  assert.deepEqual(specChanges(chosen, spec({ replicas: 2 })), ['autoReplicas']);
  assert.deepEqual(specChanges(chosen, spec({ replicas: 3, autoReplicas: true })), []);
});
