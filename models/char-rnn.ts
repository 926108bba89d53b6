/**
 * A seeded character-level recurrent step model for the autoregressive-generation example
 * (docs/generation.md). One call is one step of an Elman RNN:
 *
 *   state_out = tanh(embed[token] + state · W_h + b_h)      logits = state_out · W_o + b_o
 *
 * `token` int64 [N, 1] and `state` float32 [N, H] in; `logits` float32 [N, V] and `state_out`
 * float32 [N, H] out. The weights are drawn from a seed and never trained, so the text greedy
 * decoding makes is the same on every machine and means nothing. The recurrent weights are drawn
 * with a gain above 1 so the state keeps moving (a smaller gain settles into repeating one
 * character), which makes the text depend on everything fed so far: what a test of kept state needs.
 */
import { GraphBuilder, attr } from './onnx-builder.js';
import { Rng, heUniform, uniformArray } from './random.js';
import { DEFAULT_SEED } from './zoo.js';

/** The vocabulary: token 0 is '\n' (also what a fresh sequence starts from), then printable ASCII ' ' … '~'. */
export const CHAR_VOCAB: string = '\n' + Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');

/** The default width of the recurrent state. */
export const CHAR_RNN_HIDDEN = 128;

const PRIOR_WEIGHT = 0.6;

/** Options for `buildCharRnn`. */
export interface CharRnnOptions {
  /** Width of the recurrent state; default 128. */
  hidden?: number;
  seed?: number;
}

/** The built step model: its ONNX bytes, its state width and its vocabulary. */
export interface CharRnnModel {
  bytes: Uint8Array;
  hidden: number;
  vocab: string;
}

/** Token ids of `text`; throws a RangeError naming the first character outside the vocabulary. */
export function charTokens(text: string): number[] {
  const ids: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const id = CHAR_VOCAB.indexOf(text[i]!);
    if (id < 0) {
      const code = text.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0');
      throw new RangeError(`character U+${code} at ${i} is outside the vocabulary (printable ASCII and '\\n')`);
    }
    ids.push(id);
  }
  return ids;
}

/** The text of token ids (each id must be below the vocabulary's size). */
export function charText(ids: readonly number[]): string {
  return ids.map((id) => CHAR_VOCAB[id] ?? '').join('');
}

// Rough frequencies (per 1000 characters) of English text's space and letters; every other
// character counts as 1. Added to the output bias, as a log, so that untrained weights still
// make text that looks like letters, words and spaces rather than punctuation noise.
const LETTER_FREQUENCY: Record<string, number> = {
  ' ': 180,
  e: 100,
  t: 75,
  a: 65,
  o: 60,
  i: 57,
  n: 55,
  s: 52,
  h: 50,
  r: 49,
  d: 35,
  l: 33,
  u: 23,
  c: 22,
  m: 20,
  w: 19,
  f: 18,
  g: 16,
  y: 16,
  p: 15,
  b: 12,
  v: 8,
  k: 6,
  j: 1.5,
  x: 1.5,
  q: 1,
  z: 1,
};

function letterPrior(bias: Float32Array): Float32Array {
  for (let id = 0; id < CHAR_VOCAB.length; id++) bias[id] = bias[id]! + PRIOR_WEIGHT * Math.log(LETTER_FREQUENCY[CHAR_VOCAB[id]!] ?? 1);
  return bias;
}

/** Builds the step model described in the module comment. */
export function buildCharRnn(opts: CharRnnOptions = {}): CharRnnModel {
  const hidden = opts.hidden ?? CHAR_RNN_HIDDEN;
  if (!Number.isInteger(hidden) || hidden < 1 || hidden > 4096)
    throw new RangeError(`hidden must be a whole number in 1..4096, got ${hidden}`);
  const vocab = CHAR_VOCAB.length;
  const rng = new Rng(opts.seed ?? DEFAULT_SEED);
  // A fork per tensor keeps each one's values independent of the sizes of the others.
  const embed = uniformArray(rng.fork(), vocab * hidden, 1);
  // He's variance (2/H) gives the recurrence a gain of about √2: moving, but not saturated.
  const wh = heUniform(rng.fork(), hidden * hidden, hidden);
  const bh = uniformArray(rng.fork(), hidden, 0.1);
  const wo = uniformArray(rng.fork(), hidden * vocab, Math.sqrt(3 / hidden) * 2);
  const bo = letterPrior(uniformArray(rng.fork(), vocab, 0.1));

  const g = new GraphBuilder('troupe_char_rnn');
  g.input('token', 'int64', ['N', 1]);
  g.input('state', 'float32', ['N', hidden]);
  g.initializer('embed', [vocab, hidden], embed);
  g.initializer('w_h', [hidden, hidden], wh);
  g.initializer('b_h', [hidden], bh);
  g.initializer('w_o', [hidden, vocab], wo);
  g.initializer('b_o', [vocab], bo);
  g.node('Gather', ['embed', 'token'], ['embedded'], { axis: attr.int(0) }); // [N, 1, H]
  g.node('Flatten', ['embedded'], ['x'], { axis: attr.int(1) }); // [N, H]
  g.node('MatMul', ['state', 'w_h'], ['recurrent']);
  g.node('Add', ['x', 'recurrent'], ['pre0']);
  g.node('Add', ['pre0', 'b_h'], ['pre']);
  g.node('Tanh', ['pre'], ['state_out']);
  g.node('MatMul', ['state_out', 'w_o'], ['projected']);
  g.node('Add', ['projected', 'b_o'], ['logits']);
  g.output('logits', 'float32', ['N', vocab]);
  g.output('state_out', 'float32', ['N', hidden]);
  return { bytes: g.toBytes(), hidden, vocab: CHAR_VOCAB };
}
