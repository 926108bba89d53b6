import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import type { ModelDeploymentInput } from '../../runtime/internal.js';
import { needsNewActors } from '../../head/state/record-changes.js';

const counter = (input: Partial<ModelDeploymentInput>) =>
  ModelDeploymentSchema.parse({ name: 'counter', model: 'counter.js#Counter', kind: 'class', ...input });

test("a class actor's new constructor args, or a new kind, need new instances; the same spec again does not", () => {
  assert.equal(needsNewActors(counter({ args: [10] }), counter({ args: [10] })), false);
  assert.equal(needsNewActors(counter({}), counter({ args: [] })), false, 'no args and none are the same');
  const mlp = (kind?: 'model') => ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', ...(kind ? { kind } : {}) });
  assert.equal(needsNewActors(mlp(), mlp('model')), false, "a model deployment's kind said or left out is the same");
  assert.equal(needsNewActors(counter({ args: [10] }), counter({ args: [20] })), true, 'instances built with the old args would answer');
  assert.equal(needsNewActors(counter({ args: [{ a: 1 }] }), counter({})), true);
  assert.equal(needsNewActors(counter({}), counter({ kind: 'fn', model: 'counter.js#Counter' })), true);
  assert.equal(needsNewActors(counter({ maxConcurrency: 2 }), counter({ maxConcurrency: 4 })), true);
  assert.equal(needsNewActors(counter({ restoreTimeoutS: 5 }), counter({ restoreTimeoutS: 9 })), false, 'read by the head at each restore');
});

test('another idle spin needs new replicas (each chooses its spin as it loads); the same one again does not', () => {
  const mlp = (idleSpinMs?: number) =>
    ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', ...(idleSpinMs === undefined ? {} : { idleSpinMs }) });
  assert.equal(needsNewActors(mlp(2), mlp(2)), false);
  assert.equal(needsNewActors(mlp(), mlp(0)), true, 'chosen at load and named 0 are not the same');
  assert.equal(needsNewActors(mlp(0.2), mlp(2)), true);
});

test("another multiplex bound needs new replicas: a replica sets its bounds as it starts, and the head's dispatcher reads the spec's", () => {
  const set = (multiplex: Record<string, unknown>) => ModelDeploymentSchema.parse({ name: 'tenants', model: 'tenants', multiplex });
  assert.equal(needsNewActors(set({ maxModels: 4 }), set({})), false, 'the default said or left out is the same');
  assert.equal(needsNewActors(set({ maxModels: 4 }), set({ maxModels: 8 })), true);
  assert.equal(needsNewActors(set({}), set({ maxModelMemory: '1Gi' })), true);
});
