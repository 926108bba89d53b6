import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Future, TroupeError, wait } from '../../runtime/internal.js';

// wait(futures, { numReturns, timeoutMs }) and future.status() (runtime/client/wait.ts, future.ts),
// as Ray's ray.wait: over Futures whose settling the test controls.

function controlled(id: string): { future: Future<string>; resolve: (v: string) => void; reject: (e: Error) => void } {
  let resolve!: (v: string) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<string>((res, rej) => ((resolve = res), (reject = rej)));
  return { future: new Future<string>(id, promise), resolve, reject };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('wait and status: where futures stand, without awaiting each', () => {
  test('status() is pending, then fulfilled or rejected', async () => {
    const a = controlled('a');
    const b = controlled('b');
    assert.equal(a.future.status(), 'pending');
    a.resolve('A');
    b.reject(new Error('no'));
    assert.equal(await a.future, 'A');
    assert.equal(a.future.status(), 'fulfilled');
    await assert.rejects(Promise.resolve(b.future));
    assert.equal(b.future.status(), 'rejected');
  });

  test('wait answers once numReturns settled, ready and pending each in the order given; a failed future is ready', async () => {
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(controlled) as [ReturnType<typeof controlled>, ...ReturnType<typeof controlled>[]];
    const futures = [a, b!, c!, d!].map((x) => x.future);
    let answered = false;
    const waiting = wait(futures, { numReturns: 2 }).then((r) => ((answered = true), r));
    c!.reject(new Error('c failed'));
    await turn();
    assert.equal(answered, false, 'one of two is not enough');
    b!.resolve('B');
    d!.resolve('D');
    const { ready, pending } = await waiting;
    // At most numReturns ready, in the order given: b and c; d settled too but waits its turn.
    assert.deepEqual(
      ready.map((f) => f.id),
      ['b', 'c'],
    );
    assert.deepEqual(
      pending.map((f) => f.id),
      ['a', 'd'],
    );
    // Default numReturns is 1, as Ray's; what settled before the call counts at once.
    assert.deepEqual(
      (await wait(futures)).ready.map((f) => f.id),
      ['b'],
    );
    a.resolve('A');
    assert.deepEqual((await wait(futures, { numReturns: 4 })).pending, []);
  });

  test('timeoutMs answers with what is ready then, and waiting cancels nothing', async () => {
    const a = controlled('a');
    const b = controlled('b');
    b.resolve('B');
    const polled = await wait([a.future, b.future], { numReturns: 2, timeoutMs: 0 });
    assert.deepEqual([polled.ready.map((f) => f.id), polled.pending.map((f) => f.id)], [['b'], ['a']]);
    const later = await wait([a.future], { timeoutMs: 10 });
    assert.deepEqual(later, { ready: [], pending: [a.future] });
    a.resolve('A');
    assert.equal(await a.future, 'A');
    assert.deepEqual(await wait([]), { ready: [], pending: [] });
  });

  test('what wait cannot take is refused with TROUPE_ERR_BAD_INPUT naming it', async () => {
    const a = controlled('a').future;
    const refused = async (work: Promise<unknown>, message: RegExp) =>
      assert.rejects(
        work,
        (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_BAD_INPUT' && message.test(err.message),
      );
    await refused(wait([a, Promise.resolve(1) as never]), /futures\[1\] is not a Future/);
    await refused(wait([a, a]), /each Future may be given once/);
    await refused(wait([a], { numReturns: 2 }), /numReturns must be a whole number from 1 to the 1 futures given, got 2/);
    await refused(wait([a], { numReturns: 0 }), /got 0/);
    await refused(wait([a], { timeoutMs: -1 }), /timeoutMs must be a number of at least 0/);
  });
});
