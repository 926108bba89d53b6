import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MAX_VALUE_DEPTH, MAX_VALUE_ITEMS, encodeFrame, valueBoundsProblem } from '../../runtime/internal.js';

const SEED = Number(process.env.TROUPE_TEST_FUZZ_SEED ?? 20261129);

/** The depth and item count of a value as the bounds define them, by plain recursion (fine for the small values fast-check makes). */
function measure(value: unknown): { depth: number; items: number } {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value)) return { depth: 0, items: 0 };
  const members = Array.isArray(value) ? value : Object.values(value as object);
  let depth = 0;
  let items = members.length;
  for (const m of members) {
    const inner = measure(m);
    depth = Math.max(depth, inner.depth);
    items += inner.items;
  }
  return { depth: depth + 1, items };
}

test(`the walk agrees with a recursive measure on random values (seed ${SEED})`, () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
      const { depth, items } = measure(value);
      const problem = valueBoundsProblem(value);
      assert.equal(problem === undefined, depth <= MAX_VALUE_DEPTH && items <= MAX_VALUE_ITEMS);
    }),
    { seed: SEED, numRuns: 300, verbose: true },
  );
});

test('depth and size: the first level past each bound is refused, the last within it passes and encodes', () => {
  const nested = (depth: number) => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = [v];
    return v;
  };
  assert.equal(valueBoundsProblem(nested(MAX_VALUE_DEPTH)), undefined);
  assert.ok(encodeFrame([nested(MAX_VALUE_DEPTH)]).byteLength > 0);
  assert.equal(valueBoundsProblem(nested(MAX_VALUE_DEPTH + 1))?.past, 'depth');
  assert.equal(valueBoundsProblem(nested(1_000_000))?.past, 'depth');
  assert.equal(valueBoundsProblem(new Array(MAX_VALUE_ITEMS).fill(0)), undefined);
  assert.equal(valueBoundsProblem(new Array(MAX_VALUE_ITEMS + 1).fill(0))?.past, 'items');
  // A cycle is past the depth bound, not a hang.
  const cycle: Record<string, unknown> = {};
  cycle['self'] = cycle;
  assert.equal(valueBoundsProblem(cycle)?.past, 'depth');
  // Byte arrays are one item however long; Maps and Sets are walked.
  assert.equal(valueBoundsProblem([new Uint8Array(10_000_000)]), undefined);
  assert.equal(valueBoundsProblem(new Map([['k', nested(MAX_VALUE_DEPTH)]]))?.past, 'depth');
  assert.equal(valueBoundsProblem(new Set([nested(MAX_VALUE_DEPTH)]))?.past, 'depth');
});
