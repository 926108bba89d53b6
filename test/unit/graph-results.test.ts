import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ResultStore } from '../../head/graph/results.js';
import { TroupeError, tensor, toWire } from '../../runtime/internal.js';
import type { WireTensorMap } from '../../runtime/internal.js';

const outputs = (bytes: number): WireTensorMap => ({ y: toWire(tensor('uint8', [bytes], new Uint8Array(bytes))) });
const tick = () => new Promise((r) => setImmediate(r));

test('a run is referable from the moment it is recorded, and a reference waits for it', async () => {
  const store = new ResultStore();
  let finish!: (o: WireTensorMap) => void;
  store.record('r1', new Promise((resolve) => (finish = resolve)));
  const waiting = store.resolve('x', { run: 'r1' });
  finish(outputs(4));
  assert.deepEqual((await waiting).shape, [4]);
  await assert.rejects(store.resolve('x', { run: 'r1', output: 'z' }), /refers to output 'z' of run 'r1', which has outputs 'y'/);
  assert.throws(
    () => store.get('nope', "input 'x'"),
    (e: unknown) => e instanceof TroupeError && e.code === 'TROUPE_ERR_UNKNOWN_RUN',
  );
});

test('bounded by count and bytes: the oldest finished runs go first; running ones stay', async () => {
  const store = new ResultStore({ maxEntries: 2, maxBytes: 10, ttlMs: 60_000 });
  store.record('pending', new Promise(() => {}));
  for (const id of ['a', 'b', 'c']) store.record(id, Promise.resolve(outputs(1)));
  await tick();
  assert.deepEqual(store.size, { running: 1, finished: 2, bytes: 2 });
  assert.throws(() => store.get('a', 'x'), /does not hold/);
  store.record('big', Promise.resolve(outputs(9)));
  await tick();
  assert.equal(store.size.bytes, 10);
  assert.throws(() => store.get('b', 'x'), /does not hold/);
  assert.ok(store.get('pending', 'x'));
});

test('finished runs expire after their TTL; a failed run fails its references with its code', async () => {
  const store = new ResultStore({ ttlMs: 0 });
  store.record('gone', Promise.resolve(outputs(1)));
  await tick();
  await new Promise((r) => setTimeout(r, 5));
  assert.throws(() => store.get('gone', 'x'), /does not hold/);
  const failing = new ResultStore();
  failing.record('bad', Promise.reject(new TroupeError('TROUPE_ERR_OVERLOADED', 'queue full')));
  await assert.rejects(
    failing.resolve('x', { run: 'bad' }),
    (e: unknown) => e instanceof TroupeError && e.code === 'TROUPE_ERR_OVERLOADED' && /which failed: queue full/.test(e.message),
  );
});
