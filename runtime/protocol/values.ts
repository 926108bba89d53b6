import { TroupeError } from '../errors.js';
import { ActorReference, CallReference, MapEntries, NEGATIVE_ZERO, UserBytes, WIRE_FORM, binaryKind } from './value-types.js';

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

/** Array elements, object members, Map entries and Set members a value may hold, nested ones included. */
export const MAX_VALUE_ITEMS = 1_000_000;

/**
 * Offered each object before it is checked: a value to send in its place (a Future's reference),
 * or undefined. `where()` names its path (built only when asked).
 */
export type Substitute = (value: object, where: () => string) => unknown;

/** String.prototype.isWellFormed (Node 20 has it; TypeScript's ES2023 library does not declare it). */
type WellFormedCheck = string & { isWellFormed(): boolean };

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const MAX_PATH_SHOWN = 120;

/** A step of a path: an array index, an object key, or a Map's or Set's member (shown in braces). */
type Step = number | string | { member: string };

/** Where the walk is: the steps from the root, pushed and popped as it goes (no allocation per member). */
interface Walk {
  root: string;
  steps: Step[];
  items: number;
  substitute: Substitute | undefined;
}

function pathOf(walk: Walk): string {
  let path = walk.root;
  for (const step of walk.steps) {
    if (typeof step === 'number') path += `[${step}]`;
    else if (typeof step === 'string') path += IDENTIFIER.test(step) ? `.${step}` : `[${JSON.stringify(step.slice(0, 40))}]`;
    else path += `{${step.member}}`;
    if (path.length > MAX_PATH_SHOWN) return `${path.slice(0, MAX_PATH_SHOWN)}…`;
  }
  return path;
}

function refuse(walk: Walk, what: string): never {
  throw new TroupeError('TROUPE_ERR_UNSENDABLE_VALUE', `${pathOf(walk)}: ${what}`);
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
 * copy of the parts on the way to what needs a wire form (value-types.ts). `root` names the value
 * in errors. Throws TROUPE_ERR_UNSENDABLE_VALUE, e.g. "args[0].v: a function cannot be sent".
 */
export function toWireValue(value: unknown, root: string, substitute?: Substitute): unknown {
  return visit(value, { root, steps: [], items: 0, substitute });
}

/** Counts one more member; past the bound the whole value is refused. */
function member(walk: Walk): void {
  if (++walk.items > MAX_VALUE_ITEMS) refuse(walk, `more than ${MAX_VALUE_ITEMS} items (array elements, object members) cannot be sent`);
}

function visit(value: unknown, walk: Walk): unknown {
  switch (typeof value) {
    case 'number':
      return value === 0 && 1 / value < 0 ? NEGATIVE_ZERO : value;
    case 'string':
      if (!(value as WellFormedCheck).isWellFormed()) refuse(walk, 'a string with an unpaired surrogate cannot be sent as UTF-8');
      return value;
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return value;
    case 'function':
      return refuse(walk, 'a function cannot be sent');
    case 'symbol':
      return refuse(walk, 'a symbol cannot be sent');
  }
  if (value === null) return value;
  const object = value as object;
  if (walk.substitute) {
    const replaced = walk.substitute(object, () => pathOf(walk));
    if (replaced !== undefined) return replaced;
  }
  if (object instanceof Uint8Array) return new UserBytes(object);
  if (object instanceof ArrayBuffer || object instanceof Date) return object;
  // Already in wire form: values a forwarding process decoded (value-types.ts).
  if (object === NEGATIVE_ZERO || object instanceof CallReference || object instanceof UserBytes || object instanceof ActorReference)
    return object;
  // A value whose class says what it crosses as (an ActorHandle: a reference by name), made this
  // build's reference, which this build's encoder knows: the handle may be the client package's
  // (a build of its own, with its own msgpackr) where an actor's module imports 'troupe'.
  const wireForm = (object as { [WIRE_FORM]?: unknown })[WIRE_FORM];
  if (typeof wireForm === 'function') {
    const ref = (wireForm as () => { actor: string; sessionKey?: string }).call(object);
    return ref instanceof ActorReference ? ref : new ActorReference(ref.actor, ref.sessionKey);
  }
  if (ArrayBuffer.isView(object)) {
    if (object instanceof DataView || binaryKind(object as Parameters<typeof binaryKind>[0]) >= 0) return object;
    return refuse(walk, describeObject(object));
  }
  if (walk.steps.length >= MAX_VALUE_DEPTH) refuse(walk, `nested deeper than ${MAX_VALUE_DEPTH} levels cannot be sent`);
  if (object instanceof MapEntries) {
    const flat = visitArray(object.flat, walk);
    return flat === object.flat ? object : new MapEntries(flat);
  }
  const proto: unknown = Object.getPrototypeOf(object);
  if (proto === Array.prototype) return visitArray(object as unknown[], walk);
  if (proto === Object.prototype || proto === null) return visitObject(object as Record<string, unknown>, walk, proto === null);
  if (object instanceof Map) {
    const flat: unknown[] = [];
    let i = 0;
    for (const [k, v] of object) {
      member(walk);
      walk.steps.push({ member: `key ${i}` });
      flat.push(visit(k, walk));
      walk.steps[walk.steps.length - 1] = { member: `value ${i}` };
      flat.push(visit(v, walk));
      walk.steps.pop();
      i++;
    }
    return new MapEntries(flat);
  }
  if (object instanceof Set) {
    let items: unknown[] | null = null;
    let i = 0;
    for (const item of object) {
      member(walk);
      walk.steps.push({ member: `item ${i}` });
      const wire = visit(item, walk);
      walk.steps.pop();
      if (wire !== item && items === null) items = [...object].slice(0, i);
      items?.push(wire);
      i++;
    }
    return items === null ? object : new Set(items);
  }
  return refuse(walk, describeObject(object));
}

function visitArray(array: unknown[], walk: Walk): unknown[] {
  let out: unknown[] | null = null;
  walk.steps.push(0);
  const at = walk.steps.length - 1;
  for (let i = 0; i < array.length; i++) {
    walk.steps[at] = i;
    member(walk);
    const item = array[i];
    if (item === undefined && !(i in array)) refuse(walk, 'an array with holes cannot be sent: fill them (undefined or null)');
    const wire = visit(item, walk);
    if (wire !== item && out === null) out = array.slice(0, i);
    out?.push(wire);
  }
  walk.steps.pop();
  return out ?? array;
}

function visitObject(object: Record<string, unknown>, walk: Walk, nullPrototype: boolean): Record<string, unknown> {
  const symbols = Object.getOwnPropertySymbols(object);
  if (symbols.length > 0 && symbols.some((s) => Object.prototype.propertyIsEnumerable.call(object, s))) {
    refuse(walk, 'an object with symbol keys cannot be sent: only string keys cross');
  }
  let out: Record<string, unknown> | null = nullPrototype ? {} : null;
  const keys = Object.keys(object);
  walk.steps.push('');
  const at = walk.steps.length - 1;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    walk.steps[at] = key;
    member(walk);
    // msgpackr renames it on the way in (a guard against prototype pollution): refused, not changed.
    if (key === '__proto__') refuse(walk, "a key named '__proto__' cannot be sent");
    const item = object[key];
    const wire = visit(item, walk);
    if (wire !== item && out === null) {
      out = {};
      for (let j = 0; j < i; j++) out[keys[j]!] = object[keys[j]!];
    }
    if (out !== null) out[key] = wire;
  }
  walk.steps.pop();
  return out ?? object;
}
