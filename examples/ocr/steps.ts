/**
 * fn steps of the OCR pipeline, run in fn actors (the agent's --module-dir is dist/):
 * prepare (image -> detector input), crop (probability map -> recogniser batch) and decode
 * (recogniser output -> text). Each declares its signature, so deploying the graph checks every
 * connection against the models' metadata. The model tensors keep the names PaddleOCR's export
 * gave them ('sigmoid_0.tmp_0', 'softmax_11.tmp_0'), which is how the pipeline wires them.
 */
import { tensor } from '../../runtime/index.js';
import type { StepFn } from '../../runtime/index.js';
import { findBoxes } from './db.js';
import type { Box } from './db.js';
import { fromTensor, resizeNormalize } from './image.js';
import { loadCharset } from './models.js';

/** PaddleOCR's detector normalisation (ImageNet mean and std, applied to BGR planes as it does). */
const DET_MEAN = [0.485, 0.456, 0.406];
const DET_STD = [0.229, 0.224, 0.225];
/** The longest side the detector sees (det_limit_side_len 960, limit type 'max'). */
const DET_MAX_SIDE = 960;
/** The recogniser's input height (its metadata: [N,3,48,W]) and its narrowest batch (imgW 320). */
export const REC_HEIGHT = 48;
const REC_MIN_WIDTH = 320;

/** image uint8 [H,W,3] -> x float32 [1,3,H',W'], both sides multiples of 32, at most 960. */
export const prepare: StepFn = ({ image }) => {
  const src = fromTensor(image!);
  const ratio = Math.min(1, DET_MAX_SIDE / Math.max(src.width, src.height));
  // The detector downsamples by 32; other sizes would misalign its feature maps.
  const h = Math.max(32, Math.round((src.height * ratio) / 32) * 32);
  const w = Math.max(32, Math.round((src.width * ratio) / 32) * 32);
  const x = new Float32Array(3 * h * w);
  resizeNormalize(src, { x: 0, y: 0, width: src.width, height: src.height }, w, h, x, 0, w, DET_MEAN, DET_STD);
  return { x: tensor('float32', [1, 3, h, w], x) };
};
prepare.signature = {
  inputs: [{ name: 'image', dtype: 'uint8', shape: ['H', 'W', 3] }],
  outputs: [{ name: 'x', dtype: 'float32', shape: [1, 3, 'H32', 'W32'] }],
};

/**
 * The detector's probability map -> one recogniser row per text box. Boxes found on the map are
 * scaled back to the original image and cut from it (not from the resized copy, which lost
 * detail); each is resized to height 48 keeping its aspect ratio, and the rows are padded on the
 * right to the widest one with 0, the normalised grey PaddleOCR pads with.
 * Outputs x float32 [B,3,48,W] and boxes int32 [B,4] (x0, y0, x1, y1 in image pixels). With no
 * text found, B is 0 for boxes and x is one padding row, since the recogniser needs a batch.
 */
export const crop: StepFn = (inputs) => {
  const src = fromTensor(inputs.image!);
  const map = inputs['sigmoid_0.tmp_0']!;
  const [, , mh, mw] = map.shape as [number, number, number, number];
  const sx = src.width / mw;
  const sy = src.height / mh;
  const regions = findBoxes(map.data as Float32Array, mw, mh).map((b: Box) => {
    const x0 = Math.max(0, Math.floor(b.x0 * sx));
    const y0 = Math.max(0, Math.floor(b.y0 * sy));
    const x1 = Math.min(src.width, Math.ceil(b.x1 * sx));
    const y1 = Math.min(src.height, Math.ceil(b.y1 * sy));
    return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
  });
  const widths = regions.map((r) => Math.max(1, Math.ceil((REC_HEIGHT * r.width) / r.height)));
  const width = Math.max(REC_MIN_WIDTH, ...widths);
  const rowSize = 3 * REC_HEIGHT * width;
  const x = new Float32Array(Math.max(1, regions.length) * rowSize);
  regions.forEach((r, i) => resizeNormalize(src, r, widths[i]!, REC_HEIGHT, x, i * rowSize, width, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]));
  const boxes = Int32Array.from(regions.flatMap((r) => [r.x, r.y, r.x + r.width, r.y + r.height]));
  return {
    x: tensor('float32', [Math.max(1, regions.length), 3, REC_HEIGHT, width], x),
    boxes: tensor('int32', [regions.length, 4], boxes),
  };
};
crop.signature = {
  inputs: [
    { name: 'image', dtype: 'uint8', shape: ['H', 'W', 3] },
    { name: 'sigmoid_0.tmp_0', dtype: 'float32', shape: [1, 1, 'H32', 'W32'] },
  ],
  outputs: [
    { name: 'x', dtype: 'float32', shape: ['B', 3, REC_HEIGHT, 'W'] },
    { name: 'boxes', dtype: 'int32', shape: ['B', 4] },
  ],
};

let charset: string[] | undefined;

/** Lines read with less confidence are dropped, as PaddleOCR drops them (drop_score). */
const MIN_SCORE = 0.5;

/**
 * CTC greedy decoding: the most likely class at each time step, repeats merged, blanks (class 0)
 * dropped. The score is the mean probability of the characters kept, as PaddleOCR reports it (0
 * for a line with none). Outputs text string [B] and scores float32 [B], a line per row: it runs
 * on a few lines at a time (ocr.ts), and {@link keepLegible} drops the unreadable ones after.
 */
export const decode: StepFn = (inputs) => {
  charset ??= loadCharset();
  const probs = inputs['softmax_11.tmp_0']!;
  const [count, steps, classes] = probs.shape as [number, number, number];
  if (classes !== charset.length) throw new Error(`the recogniser has ${classes} classes but the dictionary gives ${charset.length}`);
  const data = probs.data as Float32Array;
  const text: string[] = [];
  const scores = new Float32Array(count);
  for (let b = 0; b < count; b++) {
    let line = '';
    let sum = 0;
    let chars = 0;
    let last = 0;
    for (let t = 0; t < steps; t++) {
      const base = (b * steps + t) * classes;
      let best = 0;
      for (let c = 1; c < classes; c++) if (data[base + c]! > data[base + best]!) best = c;
      if (best !== 0 && best !== last) {
        line += charset[best];
        sum += data[base + best]!;
        chars++;
      }
      last = best;
    }
    text.push(line);
    scores[b] = chars === 0 ? 0 : sum / chars;
  }
  return { text: tensor('string', [count], text), scores: tensor('float32', [count], scores) };
};
decode.signature = {
  inputs: [{ name: 'softmax_11.tmp_0', dtype: 'float32', shape: ['B', 'T', 6625] }],
  outputs: [
    { name: 'text', dtype: 'string', shape: ['B'] },
    { name: 'scores', dtype: 'float32', shape: ['B'] },
  ],
};

/**
 * The lines read with enough confidence, with their boxes: a box the detector found but nothing
 * legible in it (a smudge, a line) is not text. Outputs text [B'], scores [B'] and boxes [B',4].
 */
export const keepLegible: StepFn = (inputs) => {
  const text = inputs.text!.data as string[];
  const scores = inputs.scores!.data as Float32Array;
  const box = inputs.boxes!.data as Int32Array;
  const kept = text.map((_, b) => b).filter((b) => scores[b]! >= MIN_SCORE);
  return {
    text: tensor(
      'string',
      [kept.length],
      kept.map((b) => text[b]!),
    ),
    scores: tensor('float32', [kept.length], Float32Array.from(kept.map((b) => scores[b]!))),
    boxes: tensor('int32', [kept.length, 4], Int32Array.from(kept.flatMap((b) => [...box.subarray(b * 4, b * 4 + 4)]))),
  };
};
keepLegible.signature = {
  inputs: [
    { name: 'text', dtype: 'string', shape: ['B'] },
    { name: 'scores', dtype: 'float32', shape: ['B'] },
    { name: 'boxes', dtype: 'int32', shape: ['B', 4] },
  ],
  outputs: [
    { name: 'text', dtype: 'string', shape: ['B'] },
    { name: 'scores', dtype: 'float32', shape: ['B'] },
    { name: 'boxes', dtype: 'int32', shape: ['B', 4] },
  ],
};
