/**
 * DB (Differentiable Binarization) post-processing, after PaddleOCR's DBPostProcess: the detector
 * predicts, per pixel, the probability of being inside a *shrunk* text region; thresholding it,
 * taking each connected region and growing ("unclipping") its box back by the amount the
 * training shrank it gives the text boxes.
 *
 * Simplification: boxes are axis-aligned rectangles (PaddleOCR fits rotated minimum-area
 * rectangles to contours). That is exact for horizontal text, which is what this example reads.
 */

export interface DbOptions {
  /** A pixel is text when its probability exceeds this (PaddleOCR det_db_thresh). */
  threshold?: number;
  /** A region is kept when its mean probability exceeds this (det_db_box_thresh). */
  boxThreshold?: number;
  /** How far a box grows: area * ratio / perimeter on each side (det_db_unclip_ratio). */
  unclipRatio?: number;
  /** Regions with a shorter side (in map pixels) are noise. */
  minSize?: number;
}

/** A box in probability-map pixels, [x0, x1) x [y0, y1), with the region's mean probability. */
export interface Box {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
  score: number;
}

/** Text boxes in a probability map of `width` x `height`, in reading order. */
export function findBoxes(prob: Float32Array, width: number, height: number, options: DbOptions = {}): Box[] {
  const { threshold = 0.3, boxThreshold = 0.6, unclipRatio = 1.5, minSize = 3 } = options;
  const seen = new Uint8Array(width * height);
  const stack = new Int32Array(width * height);
  const boxes: Box[] = [];
  for (let start = 0; start < width * height; start++) {
    if (seen[start] || !(prob[start]! > threshold)) continue;
    // Flood fill one 8-connected region with an explicit stack (regions can be large).
    let top = 0;
    stack[top++] = start;
    seen[start] = 1;
    let x0 = width,
      y0 = height,
      x1 = -1,
      y1 = -1;
    while (top > 0) {
      const p = stack[--top]!;
      const px = p % width;
      const py = (p - px) / width;
      if (px < x0) x0 = px;
      if (px > x1) x1 = px;
      if (py < y0) y0 = py;
      if (py > y1) y1 = py;
      for (let dy = -1; dy <= 1; dy++) {
        const ny = py + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = px + dx;
          if (nx < 0 || nx >= width) continue;
          const q = ny * width + nx;
          if (!seen[q] && prob[q]! > threshold) {
            seen[q] = 1;
            stack[top++] = q;
          }
        }
      }
    }
    const w = x1 - x0 + 1;
    const h = y1 - y0 + 1;
    if (Math.min(w, h) < minSize) continue;
    // PaddleOCR's "fast" box score: the mean probability over the box.
    let sum = 0;
    for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) sum += prob[y * width + x]!;
    const score = sum / (w * h);
    if (score < boxThreshold) continue;
    const grow = (w * h * unclipRatio) / (2 * (w + h));
    const box = {
      x0: Math.max(0, x0 - grow),
      y0: Math.max(0, y0 - grow),
      x1: Math.min(width, x1 + 1 + grow),
      y1: Math.min(height, y1 + 1 + grow),
      score,
    };
    if (Math.min(box.x1 - box.x0, box.y1 - box.y0) < minSize + 2) continue;
    boxes.push(box);
  }
  return readingOrder(boxes);
}

/** Top to bottom; boxes whose tops are within half a line of each other, left to right. */
function readingOrder(boxes: Box[]): Box[] {
  const sorted = boxes.slice().sort((a, b) => a.y0 - b.y0 || a.x0 - b.x0);
  const lines: Box[][] = [];
  for (const box of sorted) {
    const line = lines[lines.length - 1];
    const first = line?.[0];
    if (line && first && box.y0 - first.y0 < (first.y1 - first.y0) / 2) line.push(box);
    else lines.push([box]);
  }
  return lines.flatMap((line) => line.sort((a, b) => a.x0 - b.x0));
}
