import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inspect } from 'node:util';
import { fromWire, mapFromWire, tensor, toWire } from '../../runtime/internal.js';

const logits = () =>
  tensor('float32', [1, 10], Float32Array.from([-0.08271, 0.0819, -0.5338, -0.487, 0.1469, -0.6298, -0.286, -0.4308, 0.3237, -0.2569]));
const SHOWN = 'float32[1,10] [-0.08271, 0.0819, -0.5338, -0.487, 0.1469, -0.6298, -0.286, -0.4308, …] (10 values)';

test('a tensor prints its dtype, shape and first values: String(), templates, console.log', () => {
  const t = logits();
  assert.equal(String(t), SHOWN);
  assert.equal(`${t}`, SHOWN);
  assert.equal(inspect(t), `Tensor ${SHOWN}`);
  assert.equal(inspect({ logits: t }, { breakLength: Infinity }), `{ logits: Tensor ${SHOWN} }`);
});

test('short tensors show every value; each dtype as its values read', () => {
  assert.equal(String(tensor('int64', [2], BigInt64Array.from([1n, -2n]))), 'int64[2] [1, -2]');
  assert.equal(String(tensor('float16', [2], Uint16Array.from([0x3c00, 0xc000]))), 'float16[2] [1, -2]');
  assert.equal(String(tensor('bool', [1, 2], Uint8Array.from([1, 0]))), 'bool[1,2] [true, false]');
  assert.equal(String(tensor('string', [2], ['a', 'b c'])), 'string[2] ["a", "b c"]');
  assert.equal(String(tensor('uint4', [4], Uint8Array.from([0xff, 0x10]))), 'uint4[4] (2 bytes of packed 4-bit values)');
  assert.equal(String(tensor('float32', [0], new Float32Array(0))), 'float32[0] []');
});

test('results decoded from the wire (what run() returns) print the same way', () => {
  const back = mapFromWire({ logits: toWire(logits()) }, 'output').logits!;
  assert.equal(String(back), SHOWN);
  assert.equal(String(fromWire(toWire(logits()), 'x')), SHOWN);
});

test('printing adds nothing to the fields: keys, JSON and deep equality are those of { dtype, shape, data }', () => {
  const t = logits();
  assert.deepEqual(Object.keys(t), ['dtype', 'shape', 'data']);
  assert.deepEqual(t, { dtype: 'float32', shape: [1, 10], data: t.data });
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(t)) as object), ['dtype', 'shape', 'data']);
  assert.deepEqual(structuredClone(t), { dtype: 'float32', shape: [1, 10], data: t.data });
});
