import { CallReference, MapEntries } from './value-types.js';
import { MAX_VALUE_DEPTH } from './values.js';

/**
 * `value` with each {@link CallReference} in it replaced by `valueOf(its call)`, copying only the
 * containers on the way to one. The head runs this on arguments that said they hold references;
 * nothing deeper than the senders' own bound is walked.
 */
export function replaceCallReferences(value: unknown, valueOf: (call: string) => unknown, depth = 0): unknown {
  if (value instanceof CallReference) return valueOf(value.call);
  if (value === null || typeof value !== 'object' || depth > MAX_VALUE_DEPTH) return value;
  if (value instanceof MapEntries) {
    const flat = replaceAll(value.flat, valueOf, depth);
    return flat === value.flat ? value : new MapEntries(flat);
  }
  if (value instanceof Set) {
    const items = replaceAll([...value], valueOf, depth);
    return items.every((item, i) => item === [...value][i]) ? value : new Set(items);
  }
  if (Array.isArray(value)) return replaceAll(value, valueOf, depth);
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  let out: Record<string, unknown> | null = null;
  for (const [key, item] of Object.entries(value)) {
    const replaced = replaceCallReferences(item, valueOf, depth + 1);
    if (replaced !== item) out ??= { ...(value as Record<string, unknown>) };
    if (out) Object.defineProperty(out, key, { value: replaced, enumerable: true, writable: true, configurable: true });
  }
  return out ?? value;
}

function replaceAll(items: unknown[], valueOf: (call: string) => unknown, depth: number): unknown[] {
  let out: unknown[] | null = null;
  items.forEach((item, i) => {
    const replaced = replaceCallReferences(item, valueOf, depth + 1);
    if (replaced !== item) out ??= [...items];
    if (out) out[i] = replaced;
  });
  return out ?? items;
}
