import assert from 'node:assert/strict';
import { test } from 'node:test';
import { orderedAhead } from '../../runtime/graph/ordered-ahead.js';

/** A source of 0..n-1 that counts how far it was pulled and whether it was stopped. */
function counted(n: number) {
  const seen = { pulled: 0, stopped: false };
  async function* source(): AsyncGenerator<number> {
    try {
      for (let i = 0; i < n; i++) {
        seen.pulled++;
        yield i;
      }
    } finally {
      seen.stopped = true;
    }
  }
  return { seen, source: source() };
}

/** A promise with its resolve at hand: runs that finish in the order a test says. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

test('results come in item order, whatever order the runs finish in, with at most `ahead` runs at once', async () => {
  const { source } = counted(10);
  const runs: { i: number; done: ReturnType<typeof deferred<number>> }[] = [];
  let inFlight = 0;
  let most = 0;
  const out = orderedAhead(
    source,
    (i: number) => {
      const done = deferred<number>();
      runs.push({ i, done });
      most = Math.max(most, ++inFlight);
      return done.promise.finally(() => inFlight--);
    },
    3,
  );
  const got: number[] = [];
  const reading = (async () => {
    for await (const r of out) got.push(r);
  })();
  // Finish the runs newest first, as they start: order must still hold.
  for (let finished = 0; finished < 10;) {
    await new Promise((resolve) => setImmediate(resolve));
    const open = runs.filter((r) => r.done !== undefined);
    for (const r of open.reverse()) r.done.resolve(r.i * 10);
    finished += open.length;
    runs.length = 0;
  }
  await reading;
  assert.deepEqual(got, [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
  assert.ok(most <= 3, `${most} runs at once`);
});

test('a result goes out as soon as it is ready, without waiting for more items', async () => {
  const more = deferred<void>();
  async function* slow(): AsyncGenerator<number> {
    yield 1;
    await more.promise; // a source that has nothing more yet (a generator between tokens)
    yield 2;
  }
  const out = orderedAhead(slow(), async (i: number) => i * 2, 8);
  assert.deepEqual(await out.next(), { value: 2, done: false });
  more.resolve();
  assert.deepEqual(await out.next(), { value: 4, done: false });
  assert.equal((await out.next()).done, true);
});

test('leaving early stops the source; a failed run fails the iteration and stops it too', async () => {
  const a = counted(1000);
  for await (const r of orderedAhead(a.source, async (i: number) => i, 4)) if (r === 5) break;
  assert.equal(a.seen.stopped, true);
  assert.ok(a.seen.pulled <= 5 + 1 + 4, `pulled ${a.seen.pulled} items for 6 read`);

  const b = counted(1000);
  await assert.rejects(async () => {
    for await (const _ of orderedAhead(b.source, async (i: number) => (i === 3 ? Promise.reject(new Error('run 3 failed')) : i), 4));
  }, /run 3 failed/);
  assert.equal(b.seen.stopped, true);
});
