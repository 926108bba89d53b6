import ort from 'onnxruntime-node';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';
import type { Tensor } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

/** Deterministic pseudo-random floats in [-1, 1), so failures reproduce. */
export function seededFloats(count: number, seed: number): Float32Array {
  const out = new Float32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t ^= t + Math.imul(t ^ (t >>> 7), 61 | t);
    out[i] = (((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * 2 - 1;
  }
  return out;
}

/** The reference: the same model run in this process by onnxruntime-node directly. */
export async function runInProcess(modelPath: string, inputs: Record<string, Tensor>, threads = 1): Promise<Record<string, Tensor>> {
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(inputs))
      feeds[name] = new ort.Tensor(t.dtype as 'float32', t.data as Float32Array, [...t.shape]);
    const results = await session.run(feeds);
    const out: Record<string, Tensor> = {};
    for (const [name, v] of Object.entries(results))
      out[name] = { dtype: v.type as Tensor['dtype'], shape: [...v.dims], data: v.data as Float32Array };
    return out;
  } finally {
    await session.release();
  }
}
