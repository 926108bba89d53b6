import type { DType } from './dtypes.js';

/** Values a tensor's description shows before "…": enough to recognise a result, short enough for a log line. */
export const SHOWN_VALUES = 8;

/** A float16's bits as the number they stand for (a float16 tensor's data holds the raw bits). */
function halfToNumber(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

function shownValue(dtype: DType, value: unknown): string {
  if (dtype === 'string') return JSON.stringify(value);
  if (dtype === 'bool') return value ? 'true' : 'false';
  if (typeof value === 'bigint') return String(value);
  const n = dtype === 'float16' ? halfToNumber(value as number) : (value as number);
  // Four significant digits say what a value is; the data has every digit.
  return Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(4)));
}

/**
 * `float32[1,10] [-0.0827, 0.0819, -0.5338, …] (10 values)`: what `String(t)`, a template string
 * and `console.log(t)` show of a tensor, instead of `[object Object]` or a wall of numbers.
 */
export function describeTensor(t: { dtype: DType; shape: readonly number[]; data: ArrayLike<unknown> }): string {
  const head = `${t.dtype}[${t.shape.join(',')}]`;
  // 4-bit types pack two values a byte: the bytes are not the values.
  if (t.dtype === 'int4' || t.dtype === 'uint4') return `${head} (${t.data.length} bytes of packed 4-bit values)`;
  const shown: string[] = [];
  for (let i = 0; i < Math.min(SHOWN_VALUES, t.data.length); i++) shown.push(shownValue(t.dtype, t.data[i]));
  const more = t.data.length > SHOWN_VALUES ? ', …' : '';
  return `${head} [${shown.join(', ')}${more}]${t.data.length > SHOWN_VALUES ? ` (${t.data.length} values)` : ''}`;
}

/** The key Node's util.inspect (console.log, the REPL) looks for; a global symbol, so no import of node:util. */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

function toString(this: Parameters<typeof describeTensor>[0]): string {
  return describeTensor(this);
}
function inspect(this: Parameters<typeof describeTensor>[0]): string {
  return `Tensor ${describeTensor(this)}`;
}

/**
 * Gives a tensor object `toString` and util.inspect's hook, as non-enumerable properties: its
 * fields, JSON, structured clones and deep equality stay those of `{ dtype, shape, data }`.
 */
export function printable<T extends object>(t: T): T {
  return Object.defineProperties(t, { toString: { value: toString }, [INSPECT]: { value: inspect } });
}
