import { TroupeError } from './errors.js';
import type { ErrorCode } from './errors.js';

/**
 * Bounds on a value that crosses a process as msgpack (a method's arguments, items and results,
 * a class's constructor arguments). msgpack encoders and decoders recurse once per level of
 * nesting, so a value nested a few thousand deep (a 20 KB JSON body) overflowed the head's stack
 * while it was encoded, and a value of millions of small members held its event loop for seconds.
 * Both are checked before anything is encoded, with a walk that does not recurse itself.
 */

/** Levels of nesting a value may have (the value itself is level 1); far past what arguments need, far below any stack. */
export const MAX_VALUE_DEPTH = 64;

/** Array elements, object members, Map entries and Set members a value may hold, nested ones included. */
export const MAX_VALUE_ITEMS = 1_000_000;

/** Containers whose members the encoder visits (byte arrays and other binary views are one leaf each). */
function members(value: object): Iterable<unknown> {
  if (Array.isArray(value)) return value;
  if (value instanceof Map) return [...value.keys(), ...value.values()];
  if (value instanceof Set) return value;
  return Object.values(value);
}

function isLeaf(value: unknown): boolean {
  return typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof Date;
}

/** What makes `value` too deep or too large to send, or undefined when it is within both bounds. */
export function valueBoundsProblem(value: unknown): { past: 'depth' | 'items'; why: string } | undefined {
  if (isLeaf(value)) return undefined;
  let items = 0;
  const stack: { value: object; depth: number }[] = [{ value: value as object, depth: 1 }];
  while (stack.length > 0) {
    const { value: at, depth } = stack.pop()!;
    // A cycle, too, ends here: its depth has no end.
    if (depth > MAX_VALUE_DEPTH) return { past: 'depth', why: `it is nested deeper than ${MAX_VALUE_DEPTH} levels` };
    for (const member of members(at)) {
      if (++items > MAX_VALUE_ITEMS)
        return { past: 'items', why: `it holds more than ${MAX_VALUE_ITEMS} items (array elements and object members)` };
      if (!isLeaf(member)) stack.push({ value: member as object, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * Throws naming `what` when `value` is past either bound: with `code` when given (a method's result
 * is the method's failure), else as a request's input is refused, TROUPE_ERR_BAD_TENSOR for depth (as
 * a model input nested past its rank) and TROUPE_ERR_TOO_MANY_ELEMENTS for size.
 */
export function checkValueBounds(value: unknown, what: string, code?: ErrorCode): void {
  const problem = valueBoundsProblem(value);
  if (problem === undefined) return;
  const refusal = code ?? (problem.past === 'depth' ? 'TROUPE_ERR_BAD_TENSOR' : 'TROUPE_ERR_TOO_MANY_ELEMENTS');
  throw new TroupeError(refusal, `${what} cannot be sent: ${problem.why}`);
}
