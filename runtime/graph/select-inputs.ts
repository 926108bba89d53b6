import { TroupeError } from '../errors.js';
import type { PlanNode, PlanPipeline } from './compile.js';
import { inputNames } from './signature.js';
import type { LeafInfo } from './signature.js';
import { everything, sourceOf } from './wiring.js';

/**
 * The inputs a step takes from the values available, by the pipeline wiring rules (wiring.ts):
 * the one selection both executors (executor.ts, stream-executor.ts) make. Throws
 * TROUPE_ERR_BAD_INPUT naming the input nothing produced; the caller says which step it was.
 */
export function selectInputs<T>(
  plan: PlanNode,
  values: ReadonlyMap<string, T>,
  previous: readonly string[],
  map: PlanPipeline['map'],
  leaf: (name: string) => LeafInfo,
): Record<string, T> {
  const wants = inputNames(plan, leaf);
  if (wants === null) return everything(plan.name, values, map);
  const out: Record<string, T> = {};
  for (const want of wants) {
    const src = sourceOf(want, { step: plan.name, wants: wants.length, previous, has: (n) => values.has(n), map });
    if (!src) {
      const have = [...values.keys()].map((n) => `'${n}'`).join(', ') || 'nothing';
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `needs input '${want}', which nothing produced (available: ${have})`);
    }
    out[want] = values.get(src.name)!;
  }
  return out;
}
