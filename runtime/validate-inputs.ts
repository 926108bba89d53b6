import { TroupeError } from './errors.js';
import type { ModelMetadata, TensorInfo } from './protocol/common.js';
import { formatShape } from './tensor/tensor.js';
import type { WireTensorMap } from './tensor/wire.js';

function fits(info: TensorInfo, dtype: string, shape: readonly number[], bound: Map<string, number>): boolean {
  if (info.dtype !== dtype) return false;
  // A model without shape information accepts any shape.
  if (info.shape.length === 0) return true;
  if (info.shape.length !== shape.length) return false;
  return info.shape.every((want, i) => {
    const got = shape[i]!;
    if (typeof want === 'number') return want < 0 || want === got;
    // A symbolic dim (e.g. N) may take any size, but the same name must mean the same size.
    const seen = bound.get(want);
    if (seen === undefined) bound.set(want, got);
    return seen === undefined || seen === got;
  });
}

/**
 * Checks named inputs against what a model declares, before any work is queued, and names the
 * problem: "input 'x': expected float32[N,64], got float32[1,63]". Data length against shape is
 * checked separately when the tensor is decoded (runtime/tensor/wire.ts).
 */
export function validateInputs(model: string, metadata: ModelMetadata, inputs: WireTensorMap, outputs?: readonly string[]): void {
  const declared = new Map(metadata.inputs.map((i) => [i.name, i]));
  const bound = new Map<string, number>();
  for (const [name, t] of Object.entries(inputs)) {
    const info = declared.get(name);
    if (!info) {
      const takes = metadata.inputs.map((i) => `'${i.name}'`).join(', ');
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `unknown input '${name}': model '${model}' takes ${takes}`);
    }
    if (!fits(info, t.dtype, t.shape, bound)) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_INPUT',
        `input '${name}': expected ${formatShape(info.dtype, info.shape)}, got ${formatShape(t.dtype, t.shape)}`,
      );
    }
  }
  for (const info of metadata.inputs) {
    if (!(info.name in inputs)) {
      throw new TroupeError(
        'TROUPE_ERR_BAD_INPUT',
        `missing input '${info.name}' (${formatShape(info.dtype, info.shape)}) for model '${model}'`,
      );
    }
  }
  for (const name of outputs ?? []) {
    if (!metadata.outputs.some((o) => o.name === name)) {
      const has = metadata.outputs.map((o) => `'${o.name}'`).join(', ');
      throw new TroupeError('TROUPE_ERR_BAD_INPUT', `unknown output '${name}': model '${model}' has ${has}`);
    }
  }
}
