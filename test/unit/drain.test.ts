import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShutdownGate } from '../../runtime/http/shutdown-gate.js';
import { TroupeError } from '../../runtime/internal.js';

test('draining waits for accepted work and refuses new work with the retryable SHUTTING_DOWN', async () => {
  const gate = new ShutdownGate();
  let finish!: () => void;
  const accepted = gate.run('a call', () => new Promise<string>((resolve) => (finish = () => resolve('done'))));
  assert.equal(gate.inFlight, 1);
  const drained = gate.drain(60_000);
  await assert.rejects(
    gate.run('late', async () => 'never'),
    (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_SHUTTING_DOWN' && err.retryable,
  );
  let done = false;
  void drained.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(done, false, 'the drain waits for the accepted call');
  finish();
  assert.equal(await accepted, 'done');
  assert.deepEqual(await drained, { unfinished: 0 });
});

test('a drain is bounded: work that never ends is reported, not waited for', async () => {
  const gate = new ShutdownGate();
  void gate.run('stuck', () => new Promise(() => {}));
  assert.deepEqual(await gate.drain(20), { unfinished: 1 });
});

test('work that fails (or throws) still counts as finished', async () => {
  const gate = new ShutdownGate();
  await assert.rejects(gate.run('fails', async () => Promise.reject(new Error('no'))));
  await assert.rejects(
    gate.run('throws', () => {
      throw new Error('sync');
    }),
  );
  assert.equal(gate.inFlight, 0);
  assert.deepEqual(await gate.drain(1000), { unfinished: 0 });
});

test('enter() counts work until its release is called, once', async () => {
  const gate = new ShutdownGate();
  const leave = gate.enter();
  gate.enter()();
  assert.equal(gate.inFlight, 1);
  const drained = gate.drain(60_000);
  leave();
  leave();
  assert.equal(gate.inFlight, 0);
  assert.deepEqual(await drained, { unfinished: 0 });
});
