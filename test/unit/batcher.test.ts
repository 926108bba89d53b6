import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Batcher } from '../../actors/batcher.js';
import type { BatcherOptions, RunModel } from '../../actors/batcher.js';
import { TroupeError, tensor } from '../../runtime/internal.js';
import type { Tensor } from '../../runtime/internal.js';

/**
 * A model that echoes its input and, while `hold` is set, keeps each run going until the test
 * releases it: so a test decides which calls arrive while the model is busy. `runs` holds the
 * rows of each run, in order.
 */
function fakeModel(hold: boolean) {
  const runs: number[] = [];
  const pending: (() => void)[] = [];
  const run: RunModel = async (inputs) => {
    const x = inputs.x!;
    runs.push(x.shape[0]!);
    if (hold) await new Promise<void>((resolve) => pending.push(resolve));
    return { y: tensor('float32', x.shape, Float32Array.from(x.data as Float32Array)) };
  };
  const release = () => {
    const next = pending.shift();
    assert.ok(next, 'no run is going on to release');
    next();
  };
  return { run, runs, release };
}

/** One row (or `rows` rows) filled with `k`, so each caller can check it got its own rows back. */
const call = (k: number, rows = 1): Record<string, Tensor> => ({ x: tensor('float32', [rows, 4], new Float32Array(4 * rows).fill(k)) });
const valuesOf = (t: Tensor | undefined) => [...(t!.data as Float32Array)];

/**
 * Lets the batcher's promise chains settle without letting the event loop turn: no timer, no
 * I/O and no setImmediate callback can run in here. What started by the end started "at once".
 */
async function microtasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** One full turn of the event loop (I/O and check phases), as a call arriving later would see. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Turns the loop until `done`, at most `turns` times: every wait in these tests is bounded. */
async function until(what: string, done: () => boolean, turns = 1000): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await nextTurn();
  assert.ok(done(), `gave up waiting for ${what}`);
}

const batcher = (run: RunModel, options: Partial<BatcherOptions>) =>
  new Batcher(run, { maxSize: 32, maxDelayMs: 60_000, batchable: true, ...options });

// A batcher that waited `maxDelayMs` (60 s) for company would fail these within the test timeout.
describe('Batcher: batching never costs latency at low load', { timeout: 10_000 }, () => {
  test('a call that finds the model idle runs at once, before any timer or I/O turn, even with maxDelayMs 60 s', async () => {
    const model = fakeModel(false);
    const b = batcher(model.run, {});
    for (let k = 1; k <= 3; k++) {
      const done = b.submit(call(k));
      await microtasks();
      assert.deepEqual(model.runs, Array(k).fill(1), `call ${k} started in the turn it was submitted`);
      const { outputs, timing } = await done;
      assert.deepEqual(valuesOf(outputs.y), [k, k, k, k]);
      assert.equal(timing.batchCalls, 1);
      await b.whenIdle();
    }
    assert.deepEqual(b.stats, { ...b.stats, calls: 3, batches: 3, rows: 3 });
  });

  test('calls submitted in the same turn as the first (one socket read) join its batch, still without waiting', async () => {
    const model = fakeModel(false);
    const b = batcher(model.run, {});
    const done = [1, 2, 3].map((k) => b.submit(call(k)));
    await microtasks();
    assert.deepEqual(model.runs, [3]);
    const results = await Promise.all(done);
    results.forEach(({ outputs, timing }, i) => {
      assert.deepEqual(valuesOf(outputs.y), Array(4).fill(i + 1));
      assert.equal(timing.batchCalls, 3);
    });
  });

  test('calls that arrive while a run is going on form the next batch together, and it goes without waiting to fill', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, {});
    const first = b.submit(call(1));
    await microtasks();
    assert.deepEqual(model.runs, [1]);
    // Three calls arrive in separate turns while the model is busy; the fourth, two rows.
    const later = [2, 3, 4].map((k) => b.submit(call(k)));
    for (let i = 0; i < 3; i++) await nextTurn();
    later.push(b.submit(call(5, 2)));
    assert.deepEqual(model.runs, [1], 'nothing else runs while the model is busy');
    assert.equal(b.queued, 4);
    model.release();
    await first;
    await until('the second run', () => model.runs.length === 2);
    assert.deepEqual(model.runs, [1, 5], 'the four calls that arrived during the first run, 5 rows of the 32 allowed');
    model.release();
    const results = await Promise.all(later);
    results.forEach(({ outputs, timing }, i) => {
      assert.deepEqual(valuesOf(outputs.y), Array(4 * (i === 3 ? 2 : 1)).fill(i + 2), `caller ${i + 2} got its own rows`);
      assert.deepEqual([timing.batchCalls, timing.batchRows], [4, 5]);
    });
    await b.whenIdle();
    // Idle again: the next call runs at once, alone.
    const again = b.submit(call(6));
    await microtasks();
    assert.deepEqual(model.runs, [1, 5, 1]);
    model.release();
    await again;
  });

  test('a backlog larger than maxSize goes out in full batches; preferredSizes still caps a batch at the largest it can reach', async () => {
    const sized = fakeModel(true);
    const b = batcher(sized.run, { maxSize: 3 });
    const calls = [b.submit(call(0))];
    await microtasks();
    for (let k = 1; k <= 5; k++) calls.push(b.submit(call(k)));
    for (let i = 1; i <= 3; i++) {
      sized.release();
      await until(`run ${i + 1}`, () => sized.runs.length === i + 1 || b.outstanding === 0);
    }
    await Promise.all(calls);
    assert.deepEqual(sized.runs, [1, 3, 2]);

    const preferred = fakeModel(true);
    const p = batcher(preferred.run, { maxSize: 8, preferredSizes: [2, 4] });
    const pcalls = [p.submit(call(0))];
    await microtasks();
    for (let k = 1; k <= 5; k++) pcalls.push(p.submit(call(k)));
    for (let i = 1; i <= 3; i++) {
      preferred.release();
      await until(`run ${i + 1}`, () => preferred.runs.length === i + 1 || p.outstanding === 0);
    }
    const results = await Promise.all(pcalls);
    assert.deepEqual(preferred.runs, [1, 4, 1], 'five waiting: a batch of 4 (the largest preferred size reachable), then the one left');
    results.forEach(({ outputs }, k) => assert.deepEqual(valuesOf(outputs.y), Array(4).fill(k)));
  });

  test('waitWhenIdle: the first call waits for company until its batch is full', async () => {
    const model = fakeModel(false);
    const b = batcher(model.run, { maxSize: 4, waitWhenIdle: true });
    const done = [b.submit(call(1))];
    for (let i = 0; i < 5; i++) await nextTurn();
    assert.deepEqual(model.runs, [], 'the lone first call waits');
    for (const k of [2, 3]) {
      done.push(b.submit(call(k)));
      await nextTurn();
    }
    assert.deepEqual(model.runs, [], 'three rows of four: still waiting');
    done.push(b.submit(call(4)));
    await until('the full batch', () => model.runs.length === 1, 100);
    assert.deepEqual(model.runs, [4]);
    const results = await Promise.all(done);
    results.forEach(({ outputs, timing }, i) => {
      assert.deepEqual(valuesOf(outputs.y), Array(4).fill(i + 1));
      assert.equal(timing.batchCalls, 4);
    });
  });

  test('waitWhenIdle: a first call left alone goes when maxDelayMs is up', async () => {
    const model = fakeModel(false);
    const b = batcher(model.run, { maxSize: 4, maxDelayMs: 50, waitWhenIdle: true });
    const done = b.submit(call(1));
    for (let i = 0; i < 5; i++) await nextTurn();
    assert.deepEqual(model.runs, []);
    const { timing } = await done;
    assert.deepEqual(model.runs, [1]);
    // The batcher checks the clock before it gives up waiting, so this holds exactly.
    assert.ok(timing.queueMs >= 50, `waited ${timing.queueMs} ms`);
  });
  test('with overlap 2 (an inference thread) a full batch goes ahead while one runs; a partial one waits for the model as before', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, { maxSize: 2, overlap: 2 });
    const first = b.submit(call(1));
    await microtasks();
    assert.deepEqual(model.runs, [1], 'an idle model runs a lone call at once');
    const partial = b.submit(call(2));
    for (let i = 0; i < 3; i++) await nextTurn();
    assert.deepEqual(model.runs, [1], 'one call is half a batch: it waits for the run to end');
    const filled = b.submit(call(3));
    await until('the full batch to go ahead', () => model.runs.length === 2);
    assert.deepEqual(model.runs, [1, 2], 'calls 2 and 3 fill a batch: it goes ahead into the queue of the model');
    const more = [4, 5].map((k) => b.submit(call(k)));
    for (let i = 0; i < 3; i++) await nextTurn();
    assert.deepEqual(model.runs, [1, 2], 'no more than two runs at once');
    assert.equal(b.outstanding, 5);
    model.release();
    await first;
    await until('the third run', () => model.runs.length === 3);
    assert.deepEqual(model.runs, [1, 2, 2]);
    model.release();
    model.release();
    const results = await Promise.all([partial, filled, ...more]);
    results.forEach(({ outputs, timing }, i) => {
      assert.deepEqual(valuesOf(outputs.y), Array(4).fill(i + 2), `caller ${i + 2} got its own rows`);
      assert.equal(timing.batchCalls, 2);
    });
    await b.whenIdle();
    assert.deepEqual(b.stats, { ...b.stats, calls: 5, batches: 3, rows: 5 });
  });
});

describe('Batcher: a model of several instances (runners)', { timeout: 10_000 }, () => {
  test('with 2 runners a lone call starts at once beside a run, partial or not; with both busy calls gather into batches', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, { maxSize: 4, overlap: 4, runners: 2 });
    const first = b.submit(call(1));
    await microtasks();
    assert.deepEqual(model.runs, [1], 'an idle model runs a lone call at once');
    const second = b.submit(call(2));
    await until('the second instance to take a lone call', () => model.runs.length === 2);
    assert.deepEqual(model.runs, [1, 1], 'a second instance is idle: the next call runs beside the first, a batch of one');
    const waiting = [3, 4].map((k) => b.submit(call(k)));
    for (let i = 0; i < 3; i++) await nextTurn();
    assert.deepEqual(model.runs, [1, 1], 'both instances busy: a partial batch waits');
    model.release();
    await first;
    await until('the waiting calls to run as one batch', () => model.runs.length === 3);
    assert.deepEqual(model.runs, [1, 1, 2], 'calls 3 and 4 went together to the instance that freed');
    model.release();
    model.release();
    const results = await Promise.all([second, ...waiting]);
    results.forEach(({ outputs }, i) => assert.deepEqual(valuesOf(outputs.y), Array(4).fill(i + 2), `caller ${i + 2} got its own rows`));
    await b.whenIdle();
    assert.deepEqual(b.stats, { ...b.stats, calls: 4, batches: 3, rows: 4 });
  });
  test('a partial batch starts on the session the model says is idle, though the runs going on are as many as its sessions', async () => {
    // Two runs on one instance (the second waiting in its queue), the other instance idle: what a
    // replica whose main-thread instance ended its run first looks like (actors/model-instances.ts).
    const model = fakeModel(true);
    let idle = false;
    const b = batcher(model.run, { maxSize: 4, overlap: 3, runners: 2, idleRunner: () => idle });
    const calls = [1, 2, 3, 4, 5, 6, 7, 8].map((k) => b.submit(call(k)));
    await until('a full batch running and the next sent ahead', () => model.runs.length === 2);
    assert.deepEqual(model.runs, [4, 4]);
    const lone = b.submit(call(9));
    for (let i = 0; i < 3; i++) await nextTurn();
    assert.deepEqual(model.runs, [4, 4], 'no session idle: the partial batch waits');
    idle = true;
    const woken = b.submit(call(10));
    await until('the partial batch on the idle session', () => model.runs.length === 3);
    assert.deepEqual(model.runs, [4, 4, 2], 'calls 9 and 10 started at once on the idle session');
    for (let i = 0; i < 3; i++) model.release();
    await Promise.all([...calls, lone, woken]);
  });
  test('with waitWhenIdle, a partial batch beside a run waits for company, up to maxDelayMs, then starts on the idle instance', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, { maxSize: 2, overlap: 4, runners: 2, waitWhenIdle: true, maxDelayMs: 60_000 });
    // Two calls at once fill the first batch: it goes without waiting.
    const first = b.submit(call(1));
    const second = b.submit(call(2));
    await until('the full first batch', () => model.runs.length === 1);
    assert.deepEqual(model.runs, [2], 'calls 1 and 2 went as one full batch');
    const partial = b.submit(call(3));
    for (let i = 0; i < 3; i++) await nextTurn();
    assert.deepEqual(model.runs, [2], 'half a batch waits for company beside a run, though an instance is idle');
    const filled = b.submit(call(4));
    await until('the full batch on the idle instance', () => model.runs.length === 2);
    assert.deepEqual(model.runs, [2, 2]);
    model.release();
    model.release();
    await Promise.all([first, second, partial, filled]);
  });
  test('with waitWhenIdle, a partial batch starts on the idle instance once its first call waited maxDelayMs, while the other still runs', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, { maxSize: 4, overlap: 4, runners: 2, waitWhenIdle: true, maxDelayMs: 30 });
    const first = b.submit(call(1));
    await until('the first run, after its wait', () => model.runs.length === 1, 100_000);
    const late = b.submit(call(2));
    await until('the lone call on the idle instance, after its wait', () => model.runs.length === 2, 100_000);
    assert.deepEqual(model.runs, [1, 1], 'a batch of one started beside the run that still goes on');
    model.release();
    model.release();
    const [, { timing }] = await Promise.all([first, late]);
    assert.ok(timing.queueMs >= 30, `waited ${timing.queueMs} ms for company first`);
  });
});

describe('Batcher: what a batch is made of, and how it fails', { timeout: 10_000 }, () => {
  /** One run going on (held), then `calls` submitted behind it: they form the next batch. */
  async function behindABusyModel(model: ReturnType<typeof fakeModel>, b: Batcher, calls: (() => ReturnType<Batcher['submit']>)[]) {
    const first = b.submit(call(0));
    await microtasks();
    const later = calls.map((submit) => submit());
    model.release();
    await first;
    return later;
  }

  test('a failing run fails every call of its batch with its error, and only those', async () => {
    let runs = 0;
    const held: (() => void)[] = [];
    const run: RunModel = async (inputs) => {
      runs++;
      await new Promise<void>((resolve) => held.push(resolve));
      if (runs === 2) throw new TroupeError('TROUPE_ERR_INFERENCE', 'the model failed');
      return { y: inputs.x! };
    };
    const b = batcher(run, { maxSize: 2 });
    const first = b.submit(call(0));
    await microtasks();
    const later = [1, 2, 3].map((k) => b.submit(call(k)));
    const settled = Promise.allSettled(later);
    held.shift()!();
    await first;
    await until('the second run', () => held.length === 1);
    held.shift()!();
    await until('the third run', () => held.length === 1);
    held.shift()!();
    const [one, two, three] = await settled;
    assert.deepEqual(
      [one!.status, two!.status, three!.status],
      ['rejected', 'rejected', 'fulfilled'],
      'calls 1 and 2 shared the failed run',
    );
    assert.equal((one as PromiseRejectedResult).reason.code, 'TROUPE_ERR_INFERENCE');
    assert.equal(b.stats.failed, 2);
    assert.equal(b.stats.calls, 2, 'the first run and the third');
  });

  test('outputs that do not have the batch’s rows fail the batch as INFERENCE, naming the output', async () => {
    const run: RunModel = async () => ({ y: tensor('float32', [1, 4], new Float32Array(4)) });
    const b = batcher(run, {});
    const done = [1, 2].map((k) => b.submit(call(k)));
    for (const d of done)
      await assert.rejects(d, {
        code: 'TROUPE_ERR_INFERENCE',
        message: "output 'y' has 1 rows for a batch of 2: this model cannot be batched",
      });
  });

  test('calls of different shapes or output choices go in different batches', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, {});
    const wide = (k: number): Record<string, Tensor> => ({ x: tensor('float32', [1, 8], new Float32Array(8).fill(k)) });
    const later = await behindABusyModel(model, b, [
      () => b.submit(call(1)),
      () => b.submit(wide(2)),
      () => b.submit(call(3)),
      () => b.submit(call(4), ['y']),
    ]);
    for (let i = 2; i <= 4; i++) {
      await until(`run ${i}`, () => model.runs.length === i);
      model.release();
    }
    const results = await Promise.all(later);
    assert.deepEqual(model.runs, [1, 2, 1, 1], 'calls 1 and 3 together; the wide call alone; the call that names its outputs alone');
    assert.deepEqual(valuesOf(results[1]!.outputs.y), Array(8).fill(2));
    assert.deepEqual(
      results.map((r) => r.timing.batchCalls),
      [2, 1, 2, 1],
    );
  });

  test('a model without a batch axis runs every call alone', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, { batchable: false });
    const later = await behindABusyModel(
      model,
      b,
      [1, 2, 3].map((k) => () => b.submit(call(k))),
    );
    for (let i = 2; i <= 4; i++) {
      await until(`run ${i}`, () => model.runs.length === i);
      model.release();
    }
    await Promise.all(later);
    assert.deepEqual(model.runs, [1, 1, 1, 1]);
  });

  test('a call whose deadline passed while it waited is dropped unrun', async () => {
    const model = fakeModel(true);
    const b = batcher(model.run, {});
    const first = b.submit(call(0));
    await microtasks();
    const late = b.submit(call(1), undefined, 1);
    const patient = b.submit(call(2));
    // Bounded: 1 ms of deadline, and the test's timeout.
    const passed = performance.now() + 2;
    while (performance.now() < passed) await nextTurn();
    model.release();
    await first;
    await assert.rejects(late, { code: 'TROUPE_ERR_DEADLINE_EXCEEDED', message: /in the actor's queue; not run/ });
    await until('the second run', () => model.runs.length === 2);
    model.release();
    await patient;
    assert.deepEqual(model.runs, [1, 1], 'only the patient call ran after the first');
    assert.equal(b.stats.expired, 1);
  });

  test('with idleSpinMs the event loop keeps turning for that long after the queue empties, then stops', async () => {
    const model = fakeModel(false);
    const b = batcher(model.run, { idleSpinMs: 20 });
    await b.submit(call(1));
    const ended = performance.now();
    await until('the spin after the call', () => b.spinning);
    // Bounded: the spin ends by the clock; timers still fire while it turns the loop.
    for (let i = 0; i < 400 && b.spinning; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(b.spinning, false, 'the spin ended');
    assert.ok(performance.now() - ended >= 20, 'it lasted its window');
  });

  test('without idleSpinMs, or with 0, the batcher leaves the loop to sleep after its calls', async () => {
    for (const idleSpinMs of [undefined, 0]) {
      const model = fakeModel(false);
      const b = batcher(model.run, { idleSpinMs });
      await b.submit(call(1));
      await b.whenIdle();
      for (let i = 0; i < 10; i++) {
        assert.equal(b.spinning, false, `idleSpinMs ${idleSpinMs}`);
        await nextTurn();
      }
    }
  });
});
