import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as client from '@troupe/client';
import fc from 'fast-check';
import {
  ActorHandle,
  ActorReference,
  MAX_VALUE_DEPTH,
  MAX_VALUE_ITEMS,
  NEGATIVE_ZERO,
  TroupeError,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
  readActorReferencesWith,
  toWireValue,
} from '../../runtime/internal.js';
import type { ActorTransport } from '../../runtime/internal.js';
import { propertySeed, sendableValue } from '../helpers/values.js';

/** What a receiver gets for `value`: checked as its sender checks it, encoded, decoded. */
const roundTrip = (value: unknown): unknown => decodeFrame(encodeFrame([toWireValue(value, 'value')]))[0];

/** Through a process that forwards values (the head): decoded for forwarding, sent on as it came. */
const forwarded = (value: unknown): unknown => {
  const atHead = decodeFrame(encodeFrame([toWireValue(value, 'value')]), true)[0];
  return decodeFrame(encodeFrame([toWireValue(atHead, 'value')]))[0];
};

/** The bytes of a frame as one buffer, for comparing two encodings. */
const bytesOf = (parts: Uint8Array[]) => Buffer.concat(parts);

/** Runs `property` with a printed seed, so a failure names the seed and the shrunk case to replay. */
function check<T>(arbitrary: fc.Arbitrary<T>, property: (value: T) => void, numRuns = 300): void {
  const seed = propertySeed();
  const result = fc.check(fc.property(arbitrary, property), { seed, numRuns });
  if (result.failed) {
    assert.fail(
      `property failed with seed ${seed} (replay with TROUPE_TEST_SEED=${seed}); shrunk case: ${fc.stringify(result.counterexample)}\n${String(result.errorInstance)}`,
    );
  }
}

describe('value codec: every value the docs offer arrives as it left', () => {
  test('a round trip gives back an equal value of the same types, bit for bit', () => {
    check(sendableValue(), (value) => assert.deepStrictEqual(roundTrip(value), value));
  });

  test('through a forwarding process (the head) too', () => {
    check(sendableValue(), (value) => assert.deepStrictEqual(forwarded(value), value));
  });

  test('no encoder writes bytes it did not write for this message: an encoding does not depend on what its buffer held', () => {
    // msgpackr reuses one buffer for every message: fill it with a marker, then with another, and
    // the same value must encode to the same bytes after each (a leftover byte would differ).
    const fill = (byte: number) => encodeFrame([new Uint8Array(12_000).fill(byte), 'x'.repeat(3000)]);
    check(sendableValue(), (value) => {
      const wire = toWireValue(value, 'value');
      fill(0xa5);
      const first = bytesOf(encodeFrameParts([wire]));
      fill(0x5a);
      const second = bytesOf(encodeFrameParts([wire]));
      assert.ok(first.equals(second), 'the encoding changed with what the buffer held before');
    });
  });

  test('an ActorHandle crosses as a reference by name and session (ext 0x5b), kept by a forwarder, made a handle where a reader is set', () => {
    const unused = {} as ActorTransport;
    const handle = new ActorHandle('counter', unused).session('alice');
    const wire = encodeFrame([toWireValue({ h: [handle] }, 'value')]);
    assert.ok(Buffer.from(wire).includes(Buffer.from([0x5b])), 'written as extension 0x5b');
    // No reader (an SDK client, the head): the reference itself, and a forwarder sends it on unchanged.
    assert.deepStrictEqual(decodeFrame(wire)[0], { h: [new ActorReference('counter', 'alice')] });
    assert.deepStrictEqual(forwarded({ h: handle }), { h: new ActorReference('counter', 'alice') });
    // A class actor's process: a handle again, bound to its own client.
    readActorReferencesWith((ref) => new ActorHandle(ref.actor, unused, ref.sessionKey ? { sessionKey: ref.sessionKey } : {}));
    try {
      const back = (decodeFrame(wire)[0] as { h: ActorHandle[] }).h[0]!;
      assert.ok(back instanceof ActorHandle);
      assert.equal(back.name, 'counter');
      assert.deepStrictEqual(decodeFrame(encodeFrame([toWireValue(back, 'value')]))[0], back.session('alice'));
    } finally {
      readActorReferencesWith(undefined);
    }
  });

  test("a handle of the client package's build crosses as this build's reference (an actor's module that imports 'troupe')", () => {
    // The client package is a build of its own (one bundle, its own msgpackr): this process has
    // loaded it beside the server's build of runtime/ (this file imports both), as an actor process
    // whose user module imports 'troupe' has.
    const ClientHandle = client.ActorHandle as unknown as new (name: string, transport: ActorTransport) => client.ActorHandle;
    const handle = new ClientHandle('counter', {} as ActorTransport).session('alice');
    assert.deepStrictEqual(roundTrip({ h: handle }), { h: new ActorReference('counter', 'alice') });
    // And this build's values still cross with this build's extensions (the client's copy of
    // msgpackr keeps its own): bytes large enough to travel beside the frame, a Map, -0.
    const bytes = new Uint8Array(100_000).map((_, i) => i % 251);
    assert.deepStrictEqual(roundTrip({ bytes, map: new Map([[1, -0]]) }), { bytes, map: new Map([[1, -0]]) });
  });

  test('a typed array arrives as its own class with exactly its bytes, a view as just its elements', () => {
    const base = new Float32Array([9, 1.5, 2.5, 3.5, 9]);
    const view = base.subarray(1, 4);
    const back = roundTrip(view) as Float32Array;
    assert.ok(back instanceof Float32Array);
    assert.deepEqual([...back], [1.5, 2.5, 3.5]);
    assert.equal(back.buffer.byteLength, 12, 'its buffer holds nothing but its elements');
    for (const value of [
      new Int32Array([1, -2, 2 ** 31 - 1]),
      new Float64Array([Math.PI, -0, NaN]),
      new BigUint64Array([2n ** 64n - 1n]),
    ]) {
      const got = roundTrip(value) as typeof value;
      assert.equal(got.constructor, value.constructor);
      assert.deepEqual(
        Buffer.from(got.buffer, got.byteOffset, got.byteLength),
        Buffer.from(value.buffer, value.byteOffset, value.byteLength),
      );
    }
    // Large ones travel after the frame's body (no copy into msgpack's buffer) and still arrive whole.
    const large = new Float64Array(10_000).map((_, i) => i / 3);
    const parts = encodeFrameParts([toWireValue(large, 'value')]);
    assert.ok(parts.length > 1, 'a large typed array travels outside the body');
    assert.deepStrictEqual(decodeFrame(Buffer.concat(parts))[0], large);
  });

  test('a received byte array is a copy of its own: its buffer shows nothing else of the frame', () => {
    const got = roundTrip({ a: 'secret', b: new Uint8Array([1, 2, 3]) }) as { b: Uint8Array };
    assert.equal(got.b.constructor, Uint8Array);
    assert.equal(got.b.buffer.byteLength, 3);
    assert.equal(roundTrip(Buffer.from('hi'))!.constructor, Buffer);
  });

  test('-0, NaN, BigInts past 64 bits, Dates, Maps with any keys and Sets keep what they are', () => {
    assert.ok(Object.is(roundTrip(-0), -0));
    assert.ok(Object.is(forwarded({ x: [-0] }) && (forwarded({ x: [-0] }) as { x: number[] }).x[0], -0));
    assert.ok(Number.isNaN(roundTrip(NaN)));
    assert.equal(roundTrip(-(2n ** 100n)), -(2n ** 100n));
    assert.equal(roundTrip(5n), 5n);
    assert.deepStrictEqual(roundTrip(new Map<unknown, unknown>([[{ k: 1 }, new Set([1n])]])), new Map([[{ k: 1 }, new Set([1n])]]));
    assert.deepStrictEqual(roundTrip(new Date(-1e12)), new Date(-1e12));
    assert.deepStrictEqual(roundTrip({ a: undefined }), { a: undefined });
    const bare = Object.assign(Object.create(null) as object, { x: 1 });
    assert.deepStrictEqual(roundTrip(bare), { x: 1 }, 'an object without a prototype arrives as a plain object');
    assert.equal(NEGATIVE_ZERO, decodeFrame(encodeFrame([toWireValue(-0, 'v')]), true)[0], 'the head keeps -0 as -0 to send on');
  });
});

describe('value codec: what cannot cross is refused at the sender, naming where and what', () => {
  const refused = (value: unknown, message: RegExp) =>
    assert.throws(
      () => toWireValue(value, 'args[0]'),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_UNSENDABLE_VALUE' && message.test(err.message),
    );

  test('each kind of value that cannot cross', () => {
    refused({ v: () => 1 }, /^args\[0\]\.v: a function cannot be sent$/);
    refused([1, Symbol('s')], /^args\[0\]\[1\]: a symbol cannot be sent$/);
    refused({ 'a b': new (class Point {})() }, /^args\[0\]\["a b"\]: an instance of Point cannot be sent/);
    refused(new Error('x'), /an Error \(Error: x\) cannot be sent/);
    refused({ p: Promise.resolve(1) }, /^args\[0\]\.p: a Promise cannot be sent: await it first/);
    // eslint-disable-next-line no-sparse-arrays
    refused([1, , 3], /^args\[0\]\[1\]: an array with holes cannot be sent/);
    refused({ s: 'a\ud800b' }, /^args\[0\]\.s: a string with an unpaired surrogate/);
    refused({ [Symbol('k')]: 1 }, /symbol keys/);
    refused(JSON.parse('{"a": {"__proto__": 1}}'), /^args\[0\]\.a\.__proto__: a key named '__proto__' cannot be sent/);
    refused(new Map([[1, () => 1]]), /^args\[0\]\{value 0\}: a function cannot be sent/);
    refused(new WeakMap(), /an instance of WeakMap/);
    refused(new SharedArrayBuffer(4), /SharedArrayBuffer/);
  });

  test(`nesting is bounded at ${MAX_VALUE_DEPTH} levels, before any encoder recurses`, () => {
    const nest = (levels: number) => {
      let v: unknown = 1;
      for (let i = 0; i < levels; i++) v = [v];
      return v;
    };
    assert.deepStrictEqual(roundTrip(nest(MAX_VALUE_DEPTH)), nest(MAX_VALUE_DEPTH));
    refused(nest(MAX_VALUE_DEPTH + 1), /nested deeper than 64 levels/);
    refused(nest(100_000), /nested deeper than 64 levels/);
  });

  test(`a value holds at most ${MAX_VALUE_ITEMS} items, nested ones counted: an encode that would hold a process for seconds is refused first`, () => {
    assert.equal((roundTrip(new Array(MAX_VALUE_ITEMS).fill(0)) as unknown[]).length, MAX_VALUE_ITEMS);
    refused(new Array(MAX_VALUE_ITEMS + 1).fill(0), /^args\[0\]\[1000000\]: more than 1000000 items/);
    refused(
      { a: new Array(MAX_VALUE_ITEMS / 2).fill(0), b: [new Set(new Array(MAX_VALUE_ITEMS / 2).fill(0).map((_, i) => i))] },
      /more than 1000000 items/,
    );
  });

  test('a message the encoder cannot write fails as TROUPE_ERR_UNSENDABLE_VALUE, and the next one encodes', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    assert.throws(
      () => encodeFrameParts([{ type: 'reply', id: 'x', value: deep }]),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_UNSENDABLE_VALUE',
    );
    assert.deepStrictEqual(decodeFrame(encodeFrame([{ a: new Float32Array([1]) }])), [{ a: new Float32Array([1]) }]);
  });
});

describe('value codec: the bytes on the wire are msgpack as its spec writes them', () => {
  /** A value's encoding inside its frame (a one-element array: 0x91, then the value). */
  const hex = (value: unknown) =>
    encodeFrame([toWireValue(value, 'v')])
      .toString('hex')
      .replace(/^91/, '');

  test('JSON values as msgpack types', () => {
    assert.equal(hex(null), 'c0');
    assert.equal(hex(true), 'c3');
    assert.equal(hex(5), '05');
    assert.equal(hex(-1), 'ff');
    assert.equal(hex(300), 'cd012c');
    assert.equal(hex(1.5), 'cb3ff8000000000000');
    assert.equal(hex('ab'), 'a26162');
    assert.equal(hex([1]), '9101');
    // msgpackr writes every map as map16, which the spec allows.
    assert.equal(hex({ a: 1 }), 'de0001a16101');
    assert.equal(hex(2n ** 63n - 1n), 'd37fffffffffffffff');
    assert.equal(hex(2n ** 64n - 1n), 'cfffffffffffffffff');
    assert.equal(hex(new Date(0)), 'd6ff00000000');
  });

  test('the rest as extensions (docs/actors.md lists them): type 0x55 with a kind byte, 0x57-0x59 for Set, Map and -0', () => {
    assert.equal(hex(new Uint8Array([1, 2])), 'c703550c0102');
    assert.equal(hex(Buffer.from([1, 2])), 'c703550d0102');
    assert.equal(hex(new Float32Array([1.5])), 'c70555060000c03f');
    assert.equal(hex(new Int8Array([-1])), 'c7025500ff');
    assert.equal(hex(new ArrayBuffer(1)), 'c702550a00');
    assert.equal(hex(new Set([1])), 'd457009101');
    assert.equal(hex(new Map([[1, 2]])), 'd45800920102');
    assert.equal(hex(-0), 'd4590000');
  });
});
