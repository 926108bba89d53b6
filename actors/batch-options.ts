import { BatchSchema } from '../runtime/internal.js';
import type { BatcherOptions } from './batcher.js';
import type { ServedModel } from './load-model.js';

/**
 * Batching applies only to models whose every input and output has a symbolic first dim: for
 * those, rows are independent along axis 0 and can be concatenated and split back. A graph may
 * say otherwise (an ensemble that concatenates its members' rows).
 */
export function batchOptions(
  batchJson: string | undefined,
  model: Pick<ServedModel, 'metadata' | 'batchable' | 'overlap' | 'runners' | 'idleRunner'>,
): BatcherOptions {
  const spec = batchJson ? BatchSchema.safeParse(JSON.parse(batchJson)) : undefined;
  const batch = spec?.success ? spec.data : { maxSize: 1, maxDelayMs: 0 };
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
