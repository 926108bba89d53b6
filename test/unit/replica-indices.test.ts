import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freeReplicaIndices, newActorRecord, newDeployment } from '../../head/state/record-changes.js';
import { ModelDeploymentSchema } from '../../runtime/spec.js';

// A deploy that adds replicas numbers them with the lowest numbers no live replica holds, all at
// once (one scan of the deployment, not one per replica added).

test('the lowest free numbers, skipping live replicas and reusing those of DEAD or DRAINING ones', () => {
  const d = newDeployment(ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', replicas: 6 }), 0);
  d.actors = [0, 1, 2, 3, 5].map((i) => newActorRecord(d, i));
  d.actors[1]!.state = 'DEAD';
  d.actors[3]!.state = 'DRAINING';
  assert.deepEqual(freeReplicaIndices(d, 4), [1, 3, 4, 6]);
  assert.deepEqual(freeReplicaIndices(d, 0), []);
});

test('a deployment with none yet takes 0 to n-1', () => {
  const d = newDeployment(ModelDeploymentSchema.parse({ name: 'mlp', model: 'mlp.onnx', replicas: 250 }), 0);
  assert.deepEqual(
    freeReplicaIndices(d, 250),
    Array.from({ length: 250 }, (_, i) => i),
  );
});
