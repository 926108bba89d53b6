import ort from 'onnxruntime-node';
import { charTokens } from '../../models/index.js';

/**
 * Greedy decoding of the char-level model by hand, apart from the example's code: onnxruntime-node
 * in this process, fed '\n' (how a fresh sequence starts) and `prompt` one token at a time, then the
 * `n` most likely tokens (the first on a tie), each fed back. Returns the token ids.
 */
export async function greedyTokens(bytes: Uint8Array, hidden: number, prompt: string, n: number): Promise<number[]> {
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
  let state: Float32Array = new Float32Array(hidden);
  let logits: Float32Array = new Float32Array(0);
  const feed = async (token: number) => {
    const out = await session.run({
      token: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]),
      state: new ort.Tensor('float32', state, [1, hidden]),
    });
    state = out.state_out!.data as Float32Array;
    logits = out.logits!.data as Float32Array;
  };
  for (const token of [0, ...charTokens(prompt)]) await feed(token);
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const best = logits.indexOf(Math.max(...logits));
    ids.push(best);
    await feed(best);
  }
  await session.release();
  return ids;
}
