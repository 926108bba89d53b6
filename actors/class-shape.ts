import { ConcurrencyGroupsSchema, FnSignatureSchema, HOOK_METHODS, TroupeError, groupsProblem } from '../runtime/internal.js';
import type { ClassMethods, ConcurrencyGroups } from '../runtime/internal.js';

// What a user's class offers a class actor (class-instance.ts): its public methods, which of them
// stream, the tensor signatures and the concurrency groups it declares, each read once at load.

/**
 * The public methods of an instance: functions on its prototype chain (up to Object.prototype)
 * or on itself, except the constructor, the hooks and names starting with '_' (private by
 * convention; '#' fields are not reachable at all).
 */
export function publicMethods(instance: object): string[] {
  const names = new Set<string>();
  for (let p: object | null = instance; p && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name.startsWith('_') || HOOK_METHODS.has(name)) continue;
      if (typeof (instance as Record<string, unknown>)[name] === 'function') names.add(name);
    }
  }
  return [...names].sort();
}

/** The methods that are generator functions (async or not): they stream, so a graph can pass their items on one by one. */
export function generatorMethods(instance: object, methods: readonly string[]): string[] {
  return methods.filter((name) => {
    const kind = ((instance as Record<string, unknown>)[name] as { constructor?: { name?: string } }).constructor?.name;
    return kind === 'AsyncGeneratorFunction' || kind === 'GeneratorFunction';
  });
}

/**
 * Each public method with the tensor signature the class declares for it in a static
 * `signatures` ({ method: { inputs, outputs } }, as a fn's `signature`), or null.
 */
export function methodSignatures(cls: { signatures?: unknown }, methods: readonly string[], what: string): ClassMethods {
  const declared = (cls.signatures ?? {}) as Record<string, unknown>;
  if (typeof declared !== 'object' || declared === null)
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what}.signatures is not an object`);
  const out: ClassMethods = {};
  for (const name of methods) {
    const raw = Object.hasOwn(declared, name) ? declared[name] : undefined;
    if (raw === undefined) {
      out[name] = null;
      continue;
    }
    const parsed = FnSignatureSchema.safeParse(raw);
    if (!parsed.success)
      throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what}.signatures.${name} is malformed: ${parsed.error.issues[0]?.message}`);
    out[name] = parsed.data;
  }
  const stray = Object.keys(declared).filter((k) => !methods.includes(k));
  if (stray.length > 0)
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what}.signatures names no method of the class: ${stray.join(', ')}`);
  return out;
}

/** How many calls an instance runs at once: in the default group, and in the spec's named groups. */
export interface Concurrency {
  maxConcurrency: number;
  groups?: ConcurrencyGroups | undefined;
}

/** The groups the class declares in a static `concurrencyGroups`, checked as the spec's are. */
export function classGroups(cls: { concurrencyGroups?: unknown }, what: string): ConcurrencyGroups | undefined {
  if (cls.concurrencyGroups === undefined) return undefined;
  const parsed = ConcurrencyGroupsSchema.safeParse(cls.concurrencyGroups);
  if (!parsed.success)
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `${what}.concurrencyGroups is malformed: ${groupsProblem(parsed.error)}`);
  return parsed.data;
}
