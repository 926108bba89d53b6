import { MapEntries, NEGATIVE_ZERO, TroupeError, UserBytes } from '../../runtime/internal.js';

/**
 * A user's value (a method's result, a stream item) as JSON text for an HTTP answer. JSON has no
 * BigInt, so BigInts are written as decimal strings (docs/actors.md says so); -0 is written as 0,
 * as JSON.stringify writes it. Anything else JSON cannot say (a Map, a Set, a typed array, a Date,
 * NaN, Infinity) is refused with TROUPE_ERR_UNSENDABLE_VALUE naming where it is, rather than
 * answered as `{}` or `null`: the SDK carries each of them exactly.
 */
export function jsonText(value: unknown, path = 'value'): string {
  return (
    JSON.stringify(value, function (this: unknown, key: string, v: unknown) {
      if (typeof v === 'bigint') return String(v);
      if (v === NEGATIVE_ZERO) return 0;
      if (typeof v === 'number' && !Number.isFinite(v)) refuse(path, key, `${v} has no JSON form`);
      if (v !== null && typeof v === 'object') {
        // JSON.stringify calls toJSON first: a Date arrives here as its string, so it is caught by holder.
        const held = (this as Record<string, unknown> | undefined)?.[key];
        const seen = held instanceof Date ? held : v;
        const what = kindWithoutJson(seen);
        if (what) refuse(path, key, `${what} has no JSON form: call the method with the SDK, which carries it exactly`);
      }
      return v;
    }) ?? 'null'
  );
}

function kindWithoutJson(value: object): string | undefined {
  if (value instanceof MapEntries || value instanceof Map) return 'a Map';
  if (value instanceof Set) return 'a Set';
  if (value instanceof Date) return 'a Date';
  if (value instanceof UserBytes) return 'a byte array';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  if (value instanceof ArrayBuffer) return 'an ArrayBuffer';
  return undefined;
}

function refuse(path: string, key: string, what: string): never {
  throw new TroupeError(
    'TROUPE_ERR_UNSENDABLE_VALUE',
    `${path}${key === '' ? '' : ` (at key ${JSON.stringify(key.slice(0, 40))})`}: ${what}`,
  );
}
