import { BatchSchema } from '../runtime/internal.js';
import type { BatchSpec } from '../runtime/internal.js';
import type { BatcherOptions } from './batcher.js';
import type { ServedModel } from './load-model.js';

/**
 * Batching applies only to models whose every input and output has a symbolic first dim: for
 * those, rows are independent along axis 0 and can be concatenated and split back. A graph may
 * say otherwise (an ensemble that concatenates its members' rows). `batchJson`: the deployment's
 * batch as the agent passed it (off when absent), or the one a replica chose (actors/auto-layout.ts).
 */
export function batchOptions(
  batchJson: string | BatchSpec | undefined,
  model: Pick<ServedModel, 'metadata' | 'batchable' | 'overlap' | 'runners' | 'idleRunner'>,
): BatcherOptions {
  const spec = typeof batchJson === 'string' ? BatchSchema.safeParse(JSON.parse(batchJson)) : undefined;
  const batch = typeof batchJson === 'object' ? batchJson : spec?.success ? spec.data : { maxSize: 1, maxDelayMs: 0 };
  const symbolicFirst = (shape: readonly (number | string)[]) => typeof shape[0] === 'string';
  const batchable = model.batchable !== false && [...model.metadata.inputs, ...model.metadata.outputs].every((t) => symbolicFirst(t.shape));
  return {
    maxSize: batch.maxSize,
    maxDelayMs: batch.maxDelayMs,
    waitWhenIdle: batch.waitWhenIdle === true,
    preferredSizes: batch.preferredSizes,
    batchable,
    overlap: model.overlap ?? 1,
    runners: model.runners ?? 1,
    idleRunner: model.idleRunner?.bind(model),
  };
}
