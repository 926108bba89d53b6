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
