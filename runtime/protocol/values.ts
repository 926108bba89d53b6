import { TroupeError } from '../errors.js';
import { CallReference, MapEntries, NEGATIVE_ZERO, UserBytes, binaryKind } from './value-types.js';

/**
 * What a user's value (a method's arguments and result, a stream item, a checkpoint) may hold to
 * cross between processes, checked by its sender before anything is encoded:
 *
 * - JSON's values, `undefined`, `NaN`, `Infinity` and `-0`, BigInts of any size;
 * - `Uint8Array` (a `Buffer` arrives as a `Uint8Array` of the same bytes), every other typed array
 *   as itself (a view arrives as an array of just its elements), `ArrayBuffer`, `DataView`;
 * - `Date`, `Map` and `Set` (of any of these), arrays and plain objects (one made with
 *   `Object.create(null)` arrives as a plain object).
 *
 * Anything else is refused with TROUPE_ERR_UNSENDABLE_VALUE naming its path and type, never
 * changed on the way: functions, symbols, Promises, Errors, instances of other classes, arrays
 * with holes, a key named `__proto__`, strings with an unpaired surrogate (UTF-8 cannot carry one), and nesting deeper than
 * {@link MAX_VALUE_DEPTH} (the encoder and every decoder recurse once a level).
 */
export const MAX_VALUE_DEPTH = 64;

/** Offered each object before it is checked: a value to send in its place (a Future's reference), or undefined. */
export type Substitute = (value: object, path: string) => unknown;

/** String.prototype.isWellFormed (Node 20 has it; TypeScript's ES2023 library does not declare it). */
type WellFormedCheck = string & { isWellFormed(): boolean };

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const MAX_PATH_SHOWN = 120;

function child(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return IDENTIFIER.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key.slice(0, 40))}]`;
}

function refuse(path: string, what: string): never {
  const shown = path.length > MAX_PATH_SHOWN ? `${path.slice(0, MAX_PATH_SHOWN)}…` : path;
  throw new TroupeError('TROUPE_ERR_UNSENDABLE_VALUE', `${shown}: ${what}`);
}

function describeObject(value: object): string {
  if (value instanceof Error) return `an Error (${value.name}: ${value.message.slice(0, 80)}) cannot be sent: send its message`;
  if (typeof (value as { then?: unknown }).then === 'function') return 'a Promise cannot be sent: await it first';
  if (value instanceof SharedArrayBuffer) return 'a SharedArrayBuffer cannot be sent: copy it into an ArrayBuffer';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name} cannot be sent: no other process could read it back`;
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return `an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'} cannot be sent: send a plain object, an array, a Map or a Set`;
}

/**
 * The form of `value` to hand the encoder: the same value when it needs nothing (no copy), else a
 * copy of the parts on the way to a Map or a -0 (see value-types.ts). Throws
 * TROUPE_ERR_UNSENDABLE_VALUE, e.g. "args[0].v: a function cannot be sent".
 */
export function toWireValue(value: unknown, path: string, substitute?: Substitute): unknown {
  return walk(value, path, 0, substitute);
}

function walk(value: unknown, path: string, depth: number, substitute: Substitute | undefined): unknown {
  switch (typeof value) {
    case 'number':
      return value === 0 && 1 / value < 0 ? NEGATIVE_ZERO : value;
    case 'string':
      if (!(value as WellFormedCheck).isWellFormed()) refuse(path, 'a string with an unpaired surrogate cannot be sent as UTF-8');
      return value;
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return value;
    case 'function':
      return refuse(path, 'a function cannot be sent');
    case 'symbol':
      return refuse(path, 'a symbol cannot be sent');
  }
  if (value === null) return value;
  const object = value as object;
  if (substitute) {
    const replaced = substitute(object, path);
    if (replaced !== undefined) return replaced;
  }
  if (object instanceof Uint8Array) return new UserBytes(object);
  if (object instanceof ArrayBuffer || object instanceof Date) return object;
  // Already in wire form: values a forwarding process decoded (value-types.ts).
  if (object === NEGATIVE_ZERO || object instanceof CallReference || object instanceof UserBytes) return object;
  if (object instanceof MapEntries) {
    if (depth >= MAX_VALUE_DEPTH) refuse(path, `nested deeper than ${MAX_VALUE_DEPTH} levels cannot be sent`);
    const flat = walkArray(object.flat, path, depth, substitute);
    return flat === object.flat ? object : new MapEntries(flat);
  }
  if (ArrayBuffer.isView(object)) {
    if (object instanceof DataView || binaryKind(object as Parameters<typeof binaryKind>[0]) >= 0) return object;
    return refuse(path, describeObject(object));
  }
  if (depth >= MAX_VALUE_DEPTH) refuse(path, `nested deeper than ${MAX_VALUE_DEPTH} levels cannot be sent`);
  const proto: unknown = Object.getPrototypeOf(object);
  if (proto === Array.prototype) return walkArray(object as unknown[], path, depth, substitute);
  if (proto === Object.prototype || proto === null)
    return walkObject(object as Record<string, unknown>, path, depth, substitute, proto === null);
  if (object instanceof Map) {
    const flat: unknown[] = [];
    let i = 0;
    for (const [k, v] of object) {
      flat.push(walk(k, `${path}{key ${i}}`, depth + 1, substitute), walk(v, `${path}{value ${i}}`, depth + 1, substitute));
      i++;
    }
    return new MapEntries(flat);
  }
  if (object instanceof Set) {
    let items: unknown[] | null = null;
    let i = 0;
    for (const item of object) {
      const wire = walk(item, `${path}{item ${i}}`, depth + 1, substitute);
      if (wire !== item && items === null) items = [...object].slice(0, i);
      items?.push(wire);
      i++;
    }
    return items === null ? object : new Set(items);
  }
  return refuse(path, describeObject(object));
}

function walkArray(array: unknown[], path: string, depth: number, substitute: Substitute | undefined): unknown[] {
  let out: unknown[] | null = null;
  for (let i = 0; i < array.length; i++) {
    const item = array[i];
    if (item === undefined && !(i in array)) refuse(child(path, i), 'an array with holes cannot be sent: fill them (undefined or null)');
    const wire = walk(item, child(path, i), depth + 1, substitute);
    if (wire !== item && out === null) out = array.slice(0, i);
    out?.push(wire);
  }
  return out ?? array;
}

function walkObject(
  object: Record<string, unknown>,
  path: string,
  depth: number,
  substitute: Substitute | undefined,
  nullPrototype: boolean,
): Record<string, unknown> {
  const symbols = Object.getOwnPropertySymbols(object);
  if (symbols.some((s) => Object.prototype.propertyIsEnumerable.call(object, s))) {
    refuse(path, 'an object with symbol keys cannot be sent: only string keys cross');
  }
  let out: Record<string, unknown> | null = nullPrototype ? {} : null;
  const keys = Object.keys(object);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    // msgpackr renames it on the way in (a guard against prototype pollution): refused, not changed.
    if (key === '__proto__') refuse(path, "a key named '__proto__' cannot be sent");
    const item = object[key];
    const wire = walk(item, child(path, key), depth + 1, substitute);
    if (wire !== item && out === null) {
      out = {};
      for (let j = 0; j < i; j++) out[keys[j]!] = object[keys[j]!];
    }
    if (out !== null) out[key] = wire;
  }
  return out ?? object;
}
