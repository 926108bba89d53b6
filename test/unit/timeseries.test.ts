import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SeriesStore } from '../../head/state/timeseries.js';

describe("SeriesStore: the head's in-memory time series", () => {
  test('since() gives only the samples after a sequence number, with null where a series had no value', () => {
    const store = new SeriesStore(10);
    store.record(1000, { 'rps|a': 1 });
    store.record(2000, { 'rps|a': 2, 'rps|b': 20 });
    store.record(3000, { 'rps|b': 30, 'p50|a': null });
    assert.deepEqual(store.since(0), {
      seq: 3,
      times: [1000, 2000, 3000],
      values: { 'rps|a': [1, 2, null], 'rps|b': [null, 20, 30], 'p50|a': [null, null, null] },
    });
    assert.deepEqual(store.since(2), { seq: 3, times: [3000], values: { 'rps|a': [null], 'rps|b': [30], 'p50|a': [null] } });
    assert.deepEqual(store.since(3), { seq: 3, times: [], values: { 'rps|a': [], 'rps|b': [], 'p50|a': [] } });
  });

  test('keeps the newest `capacity` samples once the ring wraps', () => {
    const store = new SeriesStore(4);
    for (let i = 1; i <= 10; i++) store.record(i * 1000, { x: i });
    const all = store.since(0);
    assert.deepEqual(all.times, [7000, 8000, 9000, 10_000]);
    assert.deepEqual(all.values.x, [7, 8, 9, 10]);
    assert.deepEqual(store.since(8).values.x, [9, 10]);
    assert.equal(store.latest('x'), 10);
  });

  test('forgets a series once it has had no value for a whole window', () => {
    const store = new SeriesStore(3);
    store.record(1, { gone: 5, kept: 1 });
    store.record(2, { kept: 2 });
    store.record(3, { kept: 3 });
    assert.ok('gone' in store.since(0).values);
    store.record(4, { kept: 4 });
    assert.deepEqual(Object.keys(store.since(0).values), ['kept']);
  });

  test('mean() averages the values among the newest samples, skipping gaps; non-finite values are gaps', () => {
    const store = new SeriesStore(8);
    for (const v of [100, 1, null, 3, Number.NaN, 5]) store.record(0, { v });
    assert.equal(store.mean('v', 5), 3);
    assert.equal(store.mean('v', 1), 5);
    assert.equal(store.mean('missing', 5), null);
    assert.equal(store.latest('missing'), null);
  });

  test('refuses a capacity that is not a positive integer', () => {
    assert.throws(() => new SeriesStore(0), RangeError);
    assert.throws(() => new SeriesStore(1.5), RangeError);
  });
});
