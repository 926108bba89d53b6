/** fn steps of the ensemble example, run in a fn actor (the agent's --module-dir is dist/). */
import { tensor } from '../../runtime/index.js';
import type { StepFn } from '../../runtime/index.js';

/**
 * Standardises each row to zero mean and unit variance: the kind of preprocessing that belongs
 * in a fn step rather than in every client. Declares its signature, so graphs around it are
 * checked at deploy.
 */
export const standardize: StepFn = ({ x }) => {
  const [rows, cols] = x!.shape as [number, number];
  const src = x!.data as Float32Array;
  const out = new Float32Array(src.length);
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let c = 0; c < cols; c++) mean += src[r * cols + c]!;
    mean /= cols;
    let variance = 0;
    for (let c = 0; c < cols; c++) variance += (src[r * cols + c]! - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / cols + 1e-6);
    for (let c = 0; c < cols; c++) out[r * cols + c] = (src[r * cols + c]! - mean) * scale;
  }
  return { x: tensor('float32', [rows, cols], out) };
};
standardize.signature = {
  inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }],
  outputs: [{ name: 'x', dtype: 'float32', shape: ['N', 64] }],
};
