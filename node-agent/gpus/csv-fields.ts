/**
 * Cell-level parsing for `nvidia-smi --format=csv,noheader,nounits` output.
 *
 * nvidia-smi reports a value it cannot read as a bracketed placeholder instead of a number:
 * `[N/A]`, `[Not Supported]`, `[Unknown Error]`, `[Insufficient Permissions]`,
 * `[GPU requires reset]`, ... The set differs between driver versions, so any bracketed
 * cell (and a bare `N/A`, which older drivers print) counts as "unavailable".
 */

/** Thrown for a cell that is neither a number nor a known placeholder. */
export class CellError extends Error {}

const PLACEHOLDER = /^\[[^\]]*\]$|^N\/A$/i;
const DECIMAL = /^\d+(?:\.\d+)?$/;
const INTEGER = /^\d+$/;

export function isUnavailable(cell: string): boolean {
  return PLACEHOLDER.test(cell);
}

/** Splits one CSV record into trimmed cells ("0, GPU-..., NVIDIA H100" has a space after each comma). */
export function splitCells(line: string): string[] {
  return line.split(',').map((cell) => cell.trim());
}

/** A non-negative number, or null when nvidia-smi could not read it. */
export function optionalNumber(cell: string, field: string): number | null {
  if (isUnavailable(cell)) return null;
  return requiredNumber(cell, field);
}

/** A non-negative number the caller cannot do without (e.g. memory.total). */
export function requiredNumber(cell: string, field: string): number {
  // A strict pattern, not Number(): Number('') is 0 and Number('0x10') is 16.
  if (!DECIMAL.test(cell)) throw new CellError(`${field} is ${JSON.stringify(cell)}, not a number`);
  return Number(cell);
}

/** A non-negative integer that identifies something (a GPU index, a pid). */
export function requiredInteger(cell: string, field: string): number {
  if (!INTEGER.test(cell)) throw new CellError(`${field} is ${JSON.stringify(cell)}, not an integer`);
  const value = Number(cell);
  if (!Number.isSafeInteger(value)) throw new CellError(`${field} ${cell} is out of range`);
  return value;
}

/** An identifier such as a GPU UUID: a placeholder there means the row is unusable. */
export function requiredText(cell: string, field: string): string {
  if (cell === '' || isUnavailable(cell)) {
    throw new CellError(`${field} is ${cell === '' ? 'empty' : cell}`);
  }
  return cell;
}

/** Non-blank lines with their 1-based line numbers; copes with CRLF and trailing blank lines. */
export function recordLines(text: string): Array<{ lineNo: number; line: string }> {
  const out: Array<{ lineNo: number; line: string }> = [];
  // A leading BOM would otherwise stick to the first GPU index.
  text
    .replace(/^\uFEFF/, '')
    .split(/\r?\n|\r/)
    .forEach((raw, i) => {
      const line = raw.trim();
      if (line !== '') out.push({ lineNo: i + 1, line });
    });
  return out;
}
