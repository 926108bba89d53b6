import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelDeploymentSchema } from '../../runtime/internal.js';
import type { ModelMetadata } from '../../runtime/internal.js';
import { newDeployment } from '../../head/state/record-changes.js';
import type { ActorRecord } from '../../head/state/records.js';
import { tritonModelConfig } from '../../head/http/triton-config.js';

const metadata: ModelMetadata = {
  inputs: [{ name: 'image', dtype: 'uint8', shape: ['batch', 3, 'h', 'w'] }],
  outputs: [
    { name: 'boxes', dtype: 'float16', shape: ['batch', 100, 4] },
    { name: 'count', dtype: 'int64', shape: ['batch'] },
  ],
};

test('GPU replicas are KIND_GPU with their devices; batching leaves the batch axis out of dims', () => {
  const d = newDeployment(
    ModelDeploymentSchema.parse({
      name: 'det',
      model: 'det.onnx',
      replicas: 2,
      gpus: 1,
      batch: { maxSize: 16, maxDelayMs: 2, waitWhenIdle: true },
    }),
    0,
  );
  d.metadata = metadata;
  d.actors = [{ gpus: [1] }, { gpus: [0] }] as ActorRecord[];
  const config = tritonModelConfig(d);
  assert.deepEqual(config.instance_group, [{ name: 'det', kind: 'KIND_GPU', count: 2, gpus: [0, 1] }]);
  assert.equal(config.max_batch_size, 16);
  assert.deepEqual(
    config.input.map((t) => [t.data_type, t.dims]),
    [['TYPE_UINT8', [3, -1, -1]]],
  );
  assert.deepEqual(
    config.output.map((t) => [t.data_type, t.dims]),
    [
      ['TYPE_FP16', [100, 4]],
      ['TYPE_INT64', []],
    ],
  );
  assert.equal(config.dynamic_batching?.max_queue_delay_microseconds, 2000);
});

test('a model without a variable first dim does not batch, whatever batch.maxSize says; no metadata yet is 503', () => {
  const d = newDeployment(ModelDeploymentSchema.parse({ name: 'fixed', model: 'f.onnx', batch: { maxSize: 8 } }), 0);
  assert.throws(
    () => tritonModelConfig(d),
    (err: { code?: string }) => err.code === 'TROUPE_ERR_NOT_READY',
  );
  d.metadata = { inputs: [{ name: 'x', dtype: 'float32', shape: [1, 4] }], outputs: [{ name: 'y', dtype: 'int4', shape: [1] }] };
  const config = tritonModelConfig(d);
  assert.equal(config.max_batch_size, 0);
  assert.equal(config.dynamic_batching, undefined);
  assert.deepEqual(config.input[0]!.dims, [1, 4]);
  assert.equal(config.output[0]!.data_type, 'TYPE_INVALID');
  assert.deepEqual(config.instance_group[0]!.kind, 'KIND_CPU');
});
