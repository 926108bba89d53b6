import * as z from 'zod';

/**
 * One step of a traced run. Times are milliseconds from the start of the run on the head.
 * `wallMs` is what the step cost the run; for model and fn steps the actor's own account splits
 * it, when the actor reports one: `queueMs` waiting behind other calls in the actor, `computeMs`
 * inside the model or fn, and `transferMs` the rest (encode, network, decode, both ways).
 */
export const StepTimingSchema = z.object({
  /** Where the step sits, e.g. 'ocr > vote > a'. */
  step: z.string(),
  kind: z.enum(['model', 'fn', 'method', 'pipeline', 'ensemble', 'dataParallel', 'combine', 'chunk']),
  startMs: z.number(),
  wallMs: z.number(),
  queueMs: z.number().optional(),
  computeMs: z.number().optional(),
  transferMs: z.number().optional(),
  /** Rows of a data-parallel chunk. */
  rows: z.number().optional(),
});
export type StepTiming = z.infer<typeof StepTimingSchema>;

export const RunTraceSchema = z.array(StepTimingSchema).max(100_000);
export type RunTrace = z.infer<typeof RunTraceSchema>;
