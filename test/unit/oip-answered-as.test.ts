import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answeredAs } from '../../runtime/internal.js';
import type { InferTarget } from '../../runtime/internal.js';

const plain: InferTarget = { name: 'c', kind: 'model', metadata: null };
const split: InferTarget = { ...plain, versions: { v1: 'c.v1', v2: 'c.v2' } };

test('an answer names the version that ran it, even where the target as last heard of names no versions', () => {
  // A front-door worker that has not yet heard of a split: the head ran the call on v1.
  assert.deepEqual(answeredAs(plain, { name: 'c' }, 'v1'), { model: 'c', version: 'v1' });
  // A split's answer: the version pinned, else the one the split chose, else "1" (the one model's replicas ran it).
  assert.deepEqual(answeredAs(split, { name: 'c', version: 'v2' }, 'v2'), { model: 'c', version: 'v2' });
  assert.deepEqual(answeredAs(split, { name: 'c' }, 'v1'), { model: 'c', version: 'v1' });
  assert.deepEqual(answeredAs(split, { name: 'c' }, undefined), { model: 'c', version: '1' });
  // One model, run by its own replicas; a multiplexed set's model is named as the URL named it.
  assert.deepEqual(answeredAs(plain, { name: 'c' }, undefined), { model: 'c', version: '1' });
  assert.deepEqual(answeredAs({ ...plain, name: 'sets', model: 'm', multiplexed: true }, { name: 'sets:m' }, undefined), {
    model: 'sets:m',
    version: '1',
  });
});
