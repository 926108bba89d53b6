import fc from 'fast-check';

/**
 * Values a user may send between processes (runtime/protocol/values.ts), for property tests:
 * every kind the codec carries, nested. `json`: only what JSON carries as itself (HTTP).
 */
export function sendableValue(options: { json?: boolean; maxDepth?: number } = {}): fc.Arbitrary<unknown> {
  const json = options.json ?? false;
  const scalar: fc.Arbitrary<unknown>[] = [
    fc.constant(null),
    fc.boolean(),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.integer(),
    json ? fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)) : fc.double(),
  ];
  if (!json) {
    scalar.push(
      fc.constant(undefined),
      fc.bigInt(),
      fc.bigInt({ min: -(2n ** 200n), max: 2n ** 200n }),
      fc.date({ noInvalidDate: true }),
      typedArray(),
      fc.uint8Array({ maxLength: 40 }),
      fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
      fc.uint8Array({ maxLength: 16 }).map((bytes) => bytes.slice().buffer),
      fc.uint8Array({ maxLength: 16 }).map((bytes) => new DataView(bytes.slice().buffer)),
    );
  }
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', maxDepth: options.maxDepth ?? 4 },
      ...scalar,
      fc.array(tie('value'), { maxLength: 5 }),
      fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 5, noNullPrototype: true }),
      ...(json
        ? []
        : [
            fc.array(fc.tuple(tie('value'), tie('value')), { maxLength: 4 }).map((entries) => new Map(entries)),
            fc.array(tie('value'), { maxLength: 4 }).map((items) => new Set(items)),
          ]),
    ),
  }));
  return value;
}

/** A typed array of every kind but Uint8Array, sometimes a view into a larger buffer. */
function typedArray(): fc.Arbitrary<unknown> {
  const kinds = [
    fc.int8Array({ maxLength: 12 }),
    fc.int16Array({ maxLength: 12 }),
    fc.uint16Array({ maxLength: 12 }),
    fc.int32Array({ maxLength: 12 }),
    fc.uint32Array({ maxLength: 12 }),
    fc.float32Array({ maxLength: 12 }),
    fc.float64Array({ maxLength: 12 }),
    fc.bigInt64Array({ maxLength: 8 }),
    fc.bigUint64Array({ maxLength: 8 }),
    fc.uint8ClampedArray({ maxLength: 12 }),
  ];
  return fc.oneof(
    ...kinds,
    // A view into the middle of a larger array: only its elements cross.
    fc.float32Array({ minLength: 3, maxLength: 12 }).map((a) => a.subarray(1, a.length - 1)),
  );
}

/** The seed fast-check runs with: TROUPE_TEST_SEED replays a failure, else a fresh one (printed on failure). */
export function propertySeed(): number {
  const given = Number(process.env.TROUPE_TEST_SEED);
  return Number.isInteger(given) ? given : Math.floor(Math.random() * 2 ** 31);
}
