import { TroupeError, tensor } from '../runtime/internal.js';
import type { ErrorCode, Tensor } from '../runtime/internal.js';

/**
 * What user code returned as a step's outputs, as tensors: a map of {dtype, shape, data}, each
 * checked, else `code` with a message that starts with `who` (fn steps and class methods alike).
 */
export function checkTensorOutputs(who: string, value: unknown, code: ErrorCode): Record<string, Tensor> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TroupeError(code, `${who} returned ${Array.isArray(value) ? 'an array' : typeof value}, not a map of tensors`);
  }
  const out: Record<string, Tensor> = {};
  for (const [key, t] of Object.entries(value as Record<string, unknown>)) {
    const { dtype, shape, data } = (t ?? {}) as Partial<Tensor>;
    try {
      out[key] = tensor(dtype!, shape ?? [], data!, `output '${key}'`);
    } catch (err) {
      throw new TroupeError(code, `${who} returned a bad tensor: ${(err as Error).message}`);
    }
  }
  return out;
}
