import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

export interface FloorResult {
  batch: number;
  /** session.run calls per second. */
  callsPerSecond: number;
  /** rows (samples) per second: calls/s x batch. */
  rowsPerSecond: number;
  p50Ms: number;
}

/** A model input as the floor feeds it: its name and its shape at a given batch size. */
export interface FloorInput {
  name: string;
  shape: (batch: number) => number[];
}

/**
 * The floor every figure is compared with: onnxruntime-node in this process, `session.run` in a
 * loop on the same model, input and thread setting, for about `seconds`. `warmedUp`, if given, is
 * awaited between the warm-up runs and the measured ones.
 */
export async function measureFloor(
  modelPath: string,
  input: FloorInput,
  batch: number,
  seconds: number,
  threads?: number,
  warmedUp?: () => Promise<void>,
): Promise<FloorResult> {
  const session = await ort.InferenceSession.create(modelPath, {
    graphOptimizationLevel: 'all',
    ...(threads !== undefined ? { intraOpNumThreads: threads, interOpNumThreads: 1 } : {}),
  });
  const shape = input.shape(batch);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.sin(i));
  const feeds = { [input.name]: new ort.Tensor('float32', data, shape) };
  for (let i = 0; i < 5; i++) await session.run(feeds);
  await warmedUp?.();
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

/**
 * The floor measured in `processes` fresh processes running at once (bench/lib/floor-child.ts),
 * each with `threads` intra-op threads: their rows per second summed, the p50 of the first.
 * Fresh processes because a floor taken in the benchmark's own process, right after a served
 * run, shares that process with the collector sweeping up the run's garbage: on this 2-core
 * machine such a two-thread floor varied from 156 to 260 samples/s between windows, a fresh
 * one by a few percent. Several processes: the best a machine's cores give a model that
 * parallelises poorly is often one single-threaded session per core.
 */
export async function measureFloorApart(
  modelPath: string,
  input: FloorInput,
  batch: number,
  seconds: number,
  threads: number,
  processes = 1,
): Promise<FloorResult> {
  const script = fileURLToPath(new URL('./floor-child.js', import.meta.url));
  const row = JSON.stringify(input.shape(1).slice(1));
  const children = Array.from({ length: processes }, () =>
    fork(script, [modelPath, input.name, row, String(batch), String(threads), String(seconds)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const next = (child: (typeof children)[number]) =>
    new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('a floor process did not answer within 120 s')), 120_000);
      child.once('message', (m) => (clearTimeout(timer), resolve(m)));
      child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`a floor process exited (${code})`))));
    });
  try {
    // All load and warm up first, then all measure together.
    await Promise.all(children.map(next));
    const results = children.map(next);
    for (const child of children) child.send('go');
    const all = (await Promise.all(results)) as FloorResult[];
    const rows = all.reduce((n, r) => n + r.rowsPerSecond, 0);
    return { batch, callsPerSecond: rows / batch, rowsPerSecond: rows, p50Ms: all[0]!.p50Ms };
  } finally {
    for (const child of children) child.kill();
  }
}
