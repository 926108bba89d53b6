import { TroupeError } from '../errors.js';
import { validateInputs } from '../validate-inputs.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { checkShape, elementCount } from '../tensor/tensor.js';
import { takesAnything } from './infer-backend.js';
import type { InferTarget } from './infer-backend.js';
import { datatypeOfDtype, dtypeOfDatatype } from './datatypes.js';

/**
 * Checks an inference request's JSON text before JSON.parse materialises it. JSON.parse turns every
 * value into a heap object and the decoder copies them again: 63 MB of empty strings sent to a
 * float32 model took the head to 940 MB and 2 s of CPU. One pass over the bytes reads each input's
 * name, datatype and shape, and counts the values of its "data" without making them, so a request
 * is refused for its declared shape, its element count or the kind of its values at a cost of about
 * a nanosecond a byte, and JSON.parse is only asked to build what the declared inputs need.
 */

/** Tensor elements one request may declare (all inputs, JSON or binary). */
export const MAX_REQUEST_ELEMENTS = 16 * 2 ** 20;
/**
 * Values one request's JSON "data" may hold: JSON.parse makes a heap value of each (a 4M-value
 * body holds the event loop and the heap for a long while), where binary data of the same tensor
 * is sliced from the body as it is.
 */
export const MAX_JSON_VALUES = 4 * 2 ** 20;
/** Values outside "data" (names, shapes, parameters, outputs): a request needs a few hundred. */
const MAX_OTHER_VALUES = 65536;
/** Up to this many values an input's elements are left to the decoder, whose messages name the bad element. */
const CHECK_KINDS_ABOVE = 1024;
/** Names, datatypes and shapes longer than this are not read here (the schema refuses them later). */
const MAX_FIELD_BYTES = 1024;

const STRING = 1;
const NUMBER = 2;
const BOOL = 4;
const NULL = 8;

interface ScannedInput {
  name?: string;
  datatype?: string;
  shape?: unknown;
  values: number;
  kinds: number;
}

/** The scan stops (and JSON.parse reports) at text that is not JSON. */
class NotJson extends Error {}

class Scanner {
  at = 0;
  dataValues = 0;
  otherValues = 0;
  constructor(
    readonly b: Buffer,
    readonly maxElements: number,
  ) {}

  space(): number {
    const b = this.b;
    while (this.at < b.length) {
      const c = b[this.at]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c;
      this.at++;
    }
    throw new NotJson();
  }

  expect(c: number): void {
    if (this.space() !== c) throw new NotJson();
    this.at++;
  }

  /** Skips a string at `at` (its opening quote), returning where its text starts. */
  string(): number {
    const start = this.at + 1;
    let end = start;
    for (;;) {
      end = this.b.indexOf(0x22, end);
      if (end < 0) throw new NotJson();
      let slashes = 0;
      while (this.b[end - 1 - slashes] === 0x5c) slashes++;
      if (slashes % 2 === 0) break;
      end++;
    }
    this.at = end + 1;
    return start;
  }

  /** A short string's value, or undefined for a long one (skipped unread). */
  shortString(): string | undefined {
    const from = this.at;
    this.string();
    return this.at - from <= MAX_FIELD_BYTES ? (JSON.parse(this.b.toString('utf8', from, this.at)) as string) : undefined;
  }

  /** Skips one value, counting its scalars (and object keys) into `into`; stops at the bounds. */
  value(into: { values: number; kinds: number }, data: boolean): void {
    // Locals, not fields, in this loop: it runs once a byte over tens of MB of hostile text.
    const b = this.b;
    const n = b.length;
    let i = this.at;
    let depth = 0;
    let values = 0;
    let kinds = 0;
    const limit = data ? MAX_JSON_VALUES - this.dataValues : MAX_OTHER_VALUES - this.otherValues;
    do {
      if (i >= n) throw new NotJson();
      const c = b[i]!;
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
        i++;
        continue;
      }
      if (c === 0x5b || c === 0x7b) {
        depth++;
        i++;
        continue;
      }
      if (c === 0x5d || c === 0x7d) {
        if (--depth < 0) throw new NotJson();
        i++;
        continue;
      }
      if (c === 0x2c || c === 0x3a) {
        if (depth === 0) throw new NotJson();
        i++;
        continue;
      }
      if (c === 0x22) {
        i++;
        for (;;) {
          if (i >= n) throw new NotJson();
          const d = b[i++]!;
          if (d === 0x22) break;
          if (d === 0x5c) i++;
        }
        kinds |= STRING;
      } else {
        kinds |= c === 0x74 || c === 0x66 ? BOOL : c === 0x6e ? NULL : NUMBER;
        while (i < n) {
          const d = b[i]!;
          if (d === 0x2c || d === 0x5d || d === 0x7d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
          i++;
        }
      }
      if (++values > limit) {
        if (data)
          throw tooMany(
            `its JSON "data" holds more than ${MAX_JSON_VALUES} values; send larger tensors as binary data (Inference-Header-Content-Length)`,
            this.maxElements,
          );
        throw new TroupeError(
          'TROUPE_ERR_TOO_MANY_ELEMENTS',
          `the inference request holds more than ${MAX_OTHER_VALUES} values outside its inputs' "data"`,
        );
      }
    } while (depth > 0);
    this.at = i;
    into.values += values;
    into.kinds |= kinds;
    if (data) this.dataValues += values;
    else this.otherValues += values;
  }

  /** `{ "key": value, ... }`, calling `field` at each value. */
  object(field: (key: string | undefined) => void): void {
    this.expect(0x7b);
    if (this.space() === 0x7d) return void this.at++;
    for (;;) {
      if (this.space() !== 0x22) throw new NotJson();
      const key = this.shortString();
      this.expect(0x3a);
      field(key);
      const c = this.space();
      this.at++;
      if (c === 0x7d) return;
      if (c !== 0x2c) throw new NotJson();
    }
  }
}

export function tooMany(what: string, max: number): TroupeError {
  return new TroupeError('TROUPE_ERR_TOO_MANY_ELEMENTS', `the inference request is too large: ${what} (at most ${max} elements a request)`);
}

function scanInputs(s: Scanner): ScannedInput[] {
  const inputs: ScannedInput[] = [];
  const other = { values: 0, kinds: 0 };
  s.object((key) => {
    if (key !== 'inputs' || s.space() !== 0x5b) return s.value(other, false);
    s.at++;
    if (s.space() === 0x5d) return void s.at++;
    for (;;) {
      if (s.space() !== 0x7b) s.value(other, false);
      else {
        const input: ScannedInput = { values: 0, kinds: 0 };
        inputs.push(input);
        s.object((field) => {
          const c = s.space();
          if ((field === 'name' || field === 'datatype') && c === 0x22) input[field] = s.shortString();
          else if (field === 'data') s.value(input, true);
          else {
            const from = s.at;
            s.value(other, false);
            if (field === 'shape' && s.at - from <= MAX_FIELD_BYTES) input.shape = JSON.parse(s.b.toString('utf8', from, s.at));
          }
        });
      }
      const c = s.space();
      s.at++;
      if (c === 0x5d) return;
      if (c !== 0x2c) throw new NotJson();
    }
  });
  return inputs;
}

function kindsOf(dtype: string): number {
  return dtype === 'string' ? STRING : dtype === 'bool' ? BOOL : NUMBER;
}

function kindNames(kinds: number): string {
  return [
    [STRING, 'strings'],
    [NUMBER, 'numbers'],
    [BOOL, 'booleans'],
    [NULL, 'nulls'],
  ]
    .filter(([k]) => kinds & (k as number))
    .map(([, n]) => n)
    .join(' and ');
}

/**
 * Refuses, before JSON.parse, a request whose declared inputs do not fit `target`'s metadata, that
 * declares more than `maxElements` elements, or whose "data" holds more values, or values of another
 * kind, than its declared shape and datatype need. Text that is not JSON is left to JSON.parse.
 */
export function checkInferJson(json: Buffer, target: InferTarget, maxElements = MAX_REQUEST_ELEMENTS): void {
  let inputs: ScannedInput[];
  try {
    inputs = scanInputs(new Scanner(json, maxElements));
  } catch (err) {
    if (err instanceof NotJson || err instanceof SyntaxError) return;
    throw err;
  }
  let declared = 0;
  const wire: WireTensorMap = {};
  let complete = true;
  inputs.forEach((input, i) => {
    const label = `input '${input.name ?? `#${i}`}'`;
    const shape = Array.isArray(input.shape) ? (input.shape as unknown[]) : undefined;
    if (!shape || input.datatype === undefined || input.name === undefined) {
      complete = false;
      if (input.values > CHECK_KINDS_ABOVE)
        throw new TroupeError(
          'TROUPE_ERR_BAD_REQUEST',
          `${label}: "data" of ${input.values} values needs a "name", "datatype" and "shape" beside it`,
        );
      return;
    }
    checkShape(shape, label);
    const dtype = dtypeOfDatatype(input.datatype, label);
    const count = elementCount(shape);
    declared += count;
    if (declared > maxElements) throw tooMany(`${label} brings the declared elements to ${declared}`, maxElements);
    if (input.values > count)
      throw new TroupeError(
        'TROUPE_ERR_BAD_TENSOR',
        `${label}: shape [${shape.join(',')}] holds ${count} elements, "data" has more than ${count}`,
      );
    const extra = input.kinds & ~kindsOf(dtype);
    if (input.values > CHECK_KINDS_ABOVE && extra) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_TENSOR',
        `${label}: "data" holds ${kindNames(extra)}, expected ${kindNames(kindsOf(dtype))} for datatype ${datatypeOfDtype(dtype)}`,
      );
    }
    wire[input.name] = { dtype, shape, data: new Uint8Array(0) };
  });
  // The same check the head makes after decoding, made before a large request's data exists (a
  // small one is decoded first, so its messages name the bad element as before).
  const large = inputs.some((input) => input.values > CHECK_KINDS_ABOVE);
  if (large && complete && inputs.length === Object.keys(wire).length && !takesAnything(target)) {
    validateInputs(target.name, target.metadata!, wire);
  }
}
