import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RankedNodes } from '../../head/control/ranked-nodes.js';

// The heap's top must always be what a scan of every kept value would choose, through any mix of
// inserts, changes (up and down) and removals, as the scheduler makes them.

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Value {
  key: string;
  load: number;
}

// Total, as the scheduler's orders are: ties on load are broken by key.
const order = (a: Value, b: Value) => a.load - b.load || a.key.localeCompare(b.key);

for (const seed of [1, 2, 3]) {
  test(`seed ${seed}: the top is the first of every kept value after each of 5,000 changes`, () => {
    const next = random(seed);
    const ranked = new RankedNodes<Value>(order);
    const kept = new Map<string, Value>();
    for (let step = 0; step < 5000; step++) {
      const key = `n${Math.floor(next() * 200)}`;
      // Mostly changes, some removals; loads from a small range so ties are common.
      const value = next() < 0.2 ? null : { key, load: Math.floor(next() * 8) };
      ranked.set(key, value);
      if (value) kept.set(key, value);
      else kept.delete(key);
      const scan = [...kept.values()].sort(order)[0];
      assert.equal(ranked.size, kept.size);
      assert.deepEqual(ranked.top(), scan, `step ${step}`);
    }
  });
}

test('removing a key that is not kept changes nothing; an empty heap has no top', () => {
  const ranked = new RankedNodes<Value>(order);
  ranked.set('a', null);
  assert.equal(ranked.top(), undefined);
  ranked.set('a', { key: 'a', load: 1 });
  ranked.set('b', null);
  assert.deepEqual(ranked.top(), { key: 'a', load: 1 });
  ranked.set('a', null);
  assert.equal(ranked.size, 0);
  assert.equal(ranked.top(), undefined);
});
