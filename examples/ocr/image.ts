/**
 * Pixels for the OCR example: PNG decoding on the client, and the bilinear resampling and
 * normalisation that PaddleOCR's preprocessing does with OpenCV, written out in plain loops so
 * the fn steps need no native image library.
 */
import { readFile } from 'node:fs/promises';
import { PNG } from 'pngjs';
import { tensor } from '../../runtime/index.js';
import type { Tensor } from '../../runtime/index.js';

/** 8-bit RGB, row-major, 3 bytes a pixel. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** Decodes a PNG (any colour type pngjs reads) to RGB, compositing transparency onto white. */
export async function readPng(path: string): Promise<RgbImage> {
  const png = PNG.sync.read(await readFile(path));
  const data = new Uint8Array(png.width * png.height * 3);
  for (let i = 0; i < png.width * png.height; i++) {
    const a = png.data[i * 4 + 3]! / 255;
    for (let c = 0; c < 3; c++) data[i * 3 + c] = Math.round(png.data[i * 4 + c]! * a + 255 * (1 - a));
  }
  return { width: png.width, height: png.height, data };
}

/** The pipeline's input: the image as uint8 [H, W, 3]. */
export function imageTensor(image: RgbImage): Tensor {
  return tensor('uint8', [image.height, image.width, 3], image.data);
}

export function fromTensor(t: Tensor): RgbImage {
  const [height, width, channels] = t.shape as [number, number, number];
  if (t.dtype !== 'uint8' || t.shape.length !== 3 || channels !== 3)
    throw new Error(`expected an image uint8 [H,W,3], got ${t.dtype} [${t.shape.join(',')}]`);
  return { width, height, data: t.data as Uint8Array };
}

export interface Region {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * Resamples `region` of `src` to `width` x `height` bilinearly (pixel centres aligned, as
 * cv2.resize's INTER_LINEAR) and writes it into `out` as planar [3, outHeight, outWidth] floats,
 * channels in BGR order (PaddleOCR's models were trained on OpenCV's BGR), each value
 * (v / 255 - mean[c]) / std[c]. Columns of `out` past `width` are left as they are (padding).
 */
export function resizeNormalize(
  src: RgbImage,
  region: Region,
  width: number,
  height: number,
  out: Float32Array,
  outOffset: number,
  outWidth: number,
  mean: readonly number[],
  std: readonly number[],
): void {
  const sx = region.width / width;
  const sy = region.height / height;
  const plane = height * outWidth;
  for (let y = 0; y < height; y++) {
    const fy = Math.min(Math.max((y + 0.5) * sy - 0.5, 0), region.height - 1);
    const y0 = Math.floor(fy);
    const y1 = Math.min(y0 + 1, region.height - 1);
    const wy = fy - y0;
    for (let x = 0; x < width; x++) {
      const fx = Math.min(Math.max((x + 0.5) * sx - 0.5, 0), region.width - 1);
      const x0 = Math.floor(fx);
      const x1 = Math.min(x0 + 1, region.width - 1);
      const wx = fx - x0;
      const p00 = ((region.y + y0) * src.width + region.x + x0) * 3;
      const p01 = ((region.y + y0) * src.width + region.x + x1) * 3;
      const p10 = ((region.y + y1) * src.width + region.x + x0) * 3;
      const p11 = ((region.y + y1) * src.width + region.x + x1) * 3;
      for (let c = 0; c < 3; c++) {
        const rgb = 2 - c; // BGR plane c holds RGB channel 2 - c
        const top = src.data[p00 + rgb]! * (1 - wx) + src.data[p01 + rgb]! * wx;
        const bottom = src.data[p10 + rgb]! * (1 - wx) + src.data[p11 + rgb]! * wx;
        const v = top * (1 - wy) + bottom * wy;
        out[outOffset + c * plane + y * outWidth + x] = (v / 255 - mean[c]!) / std[c]!;
      }
    }
  }
}
