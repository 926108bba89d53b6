import type { Wiring } from './schema.js';

/**
 * How a pipeline step finds its inputs: the one rule shared by deploy-time checks and the
 * executor, so a graph that validated runs the way the check assumed.
 *
 * For input `want` of step `step`, in order:
 *  1. an explicit map entry `{ from, to: want }` for this step (or for every step), when `from` exists;
 *  2. an output of the previous step named `want`;
 *  3. the previous step's only output, when this step takes exactly one input (positional);
 *  4. any earlier value named `want` (the pipeline's inputs, earlier steps' outputs).
 * The first step's "previous step" is the pipeline's inputs.
 */
export interface WiringContext {
  step: string;
  /** How many inputs the step takes. */
  wants: number;
  /** Names the previous step produced. */
  previous: readonly string[];
  /** Every value produced so far (the previous step's outputs included). */
  has: (name: string) => boolean;
  map: readonly Wiring[];
}

export type InputSource = { rule: 'map' | 'name' | 'position' | 'earlier'; name: string };

export function sourceOf(want: string, ctx: WiringContext): InputSource | undefined {
  for (const w of ctx.map) {
    if ((w.step === undefined || w.step === ctx.step) && w.to === want && ctx.has(w.from)) return { rule: 'map', name: w.from };
  }
  if (ctx.previous.includes(want)) return { rule: 'name', name: want };
  if (ctx.previous.length === 1 && ctx.wants === 1) return { rule: 'position', name: ctx.previous[0]! };
  if (ctx.has(want)) return { rule: 'earlier', name: want };
  return undefined;
}

/**
 * Inputs for a step that declares none (a fn without a signature): every value so far by name,
 * with this step's map entries applied on top.
 */
export function everything<T>(step: string, values: ReadonlyMap<string, T>, map: readonly Wiring[]): Record<string, T> {
  const out: Record<string, T> = Object.fromEntries(values);
  for (const w of map) {
    const v = values.get(w.from);
    if ((w.step === undefined || w.step === step) && v !== undefined) out[w.to] = v;
  }
  return out;
}
