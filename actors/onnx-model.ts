import ort from 'onnxruntime-node';
import { DTYPES, TroupeError, byteLengthOf, disableOrtTelemetryByDefault, isDType } from '../runtime/internal.js';
import type { ModelMetadata, NumericDType, Tensor, TensorInfo } from '../runtime/internal.js';
import { cudaProviderHint } from './cuda-provider-hint.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

/** Where an actor runs its model. `simulated-gpu` holds a pretend GPU but runs on the CPU provider. */
export type Device = 'cpu' | 'cuda' | 'simulated-gpu';

export interface LoadOptions {
  device: Device;
  /** onnxruntime intra-op threads; unset lets onnxruntime choose. */
  threads?: number;
}

function describe(values: readonly ort.InferenceSession.ValueMetadata[]): TensorInfo[] {
  return values.map((v) =>
    v.isTensor
      ? { name: v.name, dtype: v.type, shape: v.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : String(d))) }
      : { name: v.name, dtype: 'non-tensor', shape: [] },
  );
}

/** A zero tensor of the declared shape, symbolic dims set to 1, for the warm-up run. */
function warmupInput(info: TensorInfo): ort.Tensor {
  const shape = info.shape.map((d) => (typeof d === 'number' ? d : 1));
  const count = shape.reduce((a, b) => a * b, 1);
  if (info.dtype === 'string') return new ort.Tensor('string', new Array<string>(count).fill(''), shape);
  if (!isDType(info.dtype) || info.dtype === 'string')
    throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `input '${info.name}' has unsupported type ${info.dtype}`);
  const Ctor = DTYPES[info.dtype as NumericDType].array;
  const data = new Ctor(byteLengthOf(info.dtype, count) / Ctor.BYTES_PER_ELEMENT);
  return new ort.Tensor(info.dtype as 'float32', data as Float32Array, shape);
}

/**
 * One onnxruntime session. `run` is synchronous on this thread inside onnxruntime-node (it blocks
 * the event loop for the whole inference), which is why each actor is its own process.
 */
export class OnnxModel {
  readonly metadata: ModelMetadata;
  readonly provider: string;
  readonly #session: ort.InferenceSession;

  private constructor(session: ort.InferenceSession, provider: string) {
    this.#session = session;
    this.provider = provider;
    this.metadata = { inputs: describe(session.inputMetadata), outputs: describe(session.outputMetadata) };
  }

  /** Loads the model and runs one warm-up inference; throws TROUPE_ERR_MODEL_LOAD on either failure. */
  static async load(path: string, options: LoadOptions): Promise<OnnxModel> {
    // The actor's CUDA_VISIBLE_DEVICES names exactly its GPUs, so its first GPU is device 0.
    const provider = options.device === 'cuda' ? 'cuda' : 'cpu';
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: provider === 'cuda' ? [{ name: 'cuda', deviceId: 0 }] : ['cpu'],
      graphOptimizationLevel: 'all',
    };
    if (options.threads !== undefined) {
      sessionOptions.intraOpNumThreads = options.threads;
      sessionOptions.interOpNumThreads = 1;
    }
    // onnxruntime's pool threads spin after each parallel section by default, waiting for the next
    // one: in an actor they then hold a core that the process's own I/O (reading the next requests,
    // on the main thread while the inference thread runs) and the other replicas need. Measured on
    // the 2-core machine (docs/performance.md#the-inference-thread): 20 MobileNet runs at batch 2
    // with 3 ms of main-thread work between them took 625 ms of CPU spinning, 330 ms not; served
    // over HTTP, 1 replica x 2 threads, CPU per image fell from 20.2 to 7.9 ms.
    sessionOptions.extra = { session: { intra_op: { allow_spinning: '0' } } };
    let model: OnnxModel;
    try {
      model = new OnnxModel(await ort.InferenceSession.create(path, sessionOptions), provider);
    } catch (err) {
      const hint = provider === 'cuda' ? cudaProviderHint((err as Error).message) : '';
      throw new TroupeError(
        'TROUPE_ERR_MODEL_LOAD',
        `cannot load '${path}' with the ${provider} provider: ${(err as Error).message}${hint}`,
      );
    }
    try {
      await model.#session.run(model.#warmupFeeds());
    } catch (err) {
      throw new TroupeError('TROUPE_ERR_MODEL_LOAD', `warm-up inference of '${path}' failed: ${(err as Error).message}`);
    }
    return model;
  }

  #warmupFeeds(): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const info of this.metadata.inputs) feeds[info.name] = warmupInput(info);
    return feeds;
  }

  /**
   * The median time of `times` runs of the warm-up input (the declared shape, symbolic dims 1), in
   * ms: what one lone call costs this model, measured after the warm-up so no first-run set-up counts.
   */
  async timeWarmRuns(times: number): Promise<number> {
    const feeds = this.#warmupFeeds();
    const ms: number[] = [];
    for (let i = 0; i < times; i++) {
      const start = performance.now();
      await this.#session.run(feeds);
      ms.push(performance.now() - start);
    }
    ms.sort((a, b) => a - b);
    return ms[Math.floor(ms.length / 2)] ?? 0;
  }

  async run(inputs: Record<string, Tensor>, outputs?: readonly string[]): Promise<Record<string, Tensor>> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const [name, t] of Object.entries(inputs)) {
      feeds[name] = new ort.Tensor(t.dtype as 'float32', t.data as Float32Array, t.shape as number[]);
    }
    let results: ort.InferenceSession.OnnxValueMapType;
    try {
      results = outputs && outputs.length > 0 ? await this.#session.run(feeds, outputs as string[]) : await this.#session.run(feeds);
    } catch (err) {
      throw new TroupeError('TROUPE_ERR_INFERENCE', `onnxruntime: ${(err as Error).message}`);
    }
    const out: Record<string, Tensor> = {};
    for (const [name, value] of Object.entries(results)) {
      out[name] = { dtype: value.type as Tensor['dtype'], shape: [...value.dims], data: value.data as Tensor['data'] };
    }
    return out;
  }

  async release(): Promise<void> {
    await this.#session.release();
  }
}
