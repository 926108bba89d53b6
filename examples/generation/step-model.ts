/**
 * The recurrent step model the generator runs (models/char-rnn.ts, or a file with the same
 * contract): its shape read from the ONNX bytes before anything runs, and one greedy step.
 */
import ort from 'onnxruntime-node';
import { CHAR_VOCAB } from '../../models/char-rnn.js';
import { decodeModel } from '../../models/onnx-builder.js';

const FLOAT = 1;
const INT64 = 7;

/** What a step model must look like; `hidden` is the width of its state. */
export interface StepModelShape {
  hidden: number;
}

interface ValueInfo {
  name?: string | null;
  type?: { tensorType?: { elemType?: number | null; shape?: { dim?: { dimValue?: unknown }[] | null } | null } | null } | null;
}

/** The fixed size of dimension 1 of a rank-2 tensor of element type `elemType` named `name`, or an error saying what is wrong. */
function secondDim(infos: readonly ValueInfo[], name: string, elemType: number, what: string): number {
  const info = infos.find((i) => i.name === name);
  if (!info) throw new Error(`the step model has no ${what} '${name}' (it has ${infos.map((i) => i.name).join(', ') || 'none'})`);
  const tensor = info.type?.tensorType;
  if (tensor?.elemType !== elemType)
    throw new Error(`the step model's ${what} '${name}' has element type ${tensor?.elemType}, not ${elemType}`);
  const dims = tensor.shape?.dim ?? [];
  const size = Number(dims[1]?.dimValue ?? 0);
  if (dims.length !== 2 || !Number.isInteger(size) || size < 1)
    throw new Error(`the step model's ${what} '${name}' must be [N, fixed size], got ${dims.length} dims`);
  return size;
}

/**
 * Checks ONNX bytes against the step contract (token int64 [N,1], state float32 [N,H] in;
 * logits float32 [N,V], state_out float32 [N,H] out, V the vocabulary's size) and returns H.
 * Synchronous, so a generator given a wrong model fails in its constructor: the deploy fails.
 */
export function stepModelShape(bytes: Uint8Array): StepModelShape {
  let graph;
  try {
    graph = decodeModel(bytes).graph;
  } catch (err) {
    throw new Error(`the step model is not an ONNX model: ${(err as Error).message}`, { cause: err });
  }
  if (!graph) throw new Error('the step model has no graph');
  const inputs = graph.input ?? [];
  const outputs = graph.output ?? [];
  if (secondDim(inputs, 'token', INT64, 'input') !== 1) throw new Error("the step model's input 'token' must be [N, 1]");
  const hidden = secondDim(inputs, 'state', FLOAT, 'input');
  const vocab = secondDim(outputs, 'logits', FLOAT, 'output');
  if (vocab !== CHAR_VOCAB.length)
    throw new Error(`the step model's logits have ${vocab} classes; the vocabulary has ${CHAR_VOCAB.length}`);
  if (secondDim(outputs, 'state_out', FLOAT, 'output') !== hidden)
    throw new Error("the step model's 'state_out' is not as wide as its 'state'");
  return { hidden };
}

/** One onnxruntime session of a step model, run one token (batch of 1) at a time. */
export class StepModel {
  readonly hidden: number;
  readonly #session: ort.InferenceSession;

  private constructor(session: ort.InferenceSession, hidden: number) {
    this.#session = session;
    this.hidden = hidden;
  }

  /** One thread: an actor runs one step at a time, and the model is tiny (docs/actors.md). */
  static async load(bytes: Uint8Array, shape: StepModelShape): Promise<StepModel> {
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1 });
    return new StepModel(session, shape.hidden);
  }

  /** Feeds `token` to the model in `state`: the state after it, and the most likely next token (the first, on a tie). */
  async step(token: number, state: Float32Array): Promise<{ next: number; state: Float32Array }> {
    const out = await this.#session.run({
      token: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]),
      state: new ort.Tensor('float32', state, [1, this.hidden]),
    });
    const logits = out.logits!.data as Float32Array;
    let next = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[next]!) next = i;
    return { next, state: out.state_out!.data as Float32Array };
  }
}
