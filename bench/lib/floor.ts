import ort from 'onnxruntime-node';

export interface FloorResult {
  batch: number;
  /** session.run calls per second. */
  callsPerSecond: number;
  /** rows (samples) per second: calls/s x batch. */
  rowsPerSecond: number;
  p50Ms: number;
}

/**
 * The floor every figure is compared with: onnxruntime-node in this process, `session.run` in a
 * loop on the same model, input and thread setting, for about `seconds`.
 */
export async function measureFloor(modelPath: string, input: { name: string; shape: (batch: number) => number[] }, batch: number, seconds: number, threads?: number): Promise<FloorResult> {
  const session = await ort.InferenceSession.create(modelPath, {
    graphOptimizationLevel: 'all',
    ...(threads !== undefined ? { intraOpNumThreads: threads, interOpNumThreads: 1 } : {}),
  });
  const shape = input.shape(batch);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.sin(i));
  const feeds = { [input.name]: new ort.Tensor('float32', data, shape) };
  for (let i = 0; i < 5; i++) await session.run(feeds);
  const latencies: number[] = [];
  const end = performance.now() + seconds * 1000;
  const begin = performance.now();
  while (performance.now() < end) {
    const t = performance.now();
    await session.run(feeds);
    latencies.push(performance.now() - t);
  }
  const elapsed = (performance.now() - begin) / 1000;
  await session.release();
  latencies.sort((a, b) => a - b);
  const calls = latencies.length / elapsed;
  return { batch, callsPerSecond: calls, rowsPerSecond: calls * batch, p50Ms: latencies[Math.floor(latencies.length / 2)]! };
}
