import { readFile, stat } from 'node:fs/promises';
import { z } from 'zod';
import { LabelListSchema, TroupeError } from '../runtime/internal.js';

/** A label file is a few MB at most: a million labels of a few characters. */
const MAX_LABEL_FILE_BYTES = 64 * 2 ** 20;

/**
 * Reads the label files the agent resolved (TROUPE_LABEL_FILES: output -> absolute path) as
 * Triton reads a `label_filename`: one label per line, the index is the line number; a last
 * newline ends the last label rather than starting an empty one, and a CR before it is dropped.
 * Refused as a load failure with the file named as the deploy named it (`shown`).
 */
export async function readLabelFiles(json: string, shown: Record<string, string> = {}): Promise<Record<string, string[]>> {
  const files = z.record(z.string(), z.string()).parse(JSON.parse(json));
  const lines: Record<string, string[]> = {};
  for (const [output, path] of Object.entries(files)) {
    const name = shown[output] ?? output;
    const refuse = (why: string) => new TroupeError('TROUPE_ERR_MODEL_PATH', `label file '${name}': ${why}`);
    const info = await stat(path).catch(() => undefined);
    if (!info?.isFile()) throw refuse('cannot be read');
    if (info.size > MAX_LABEL_FILE_BYTES) throw refuse(`is ${info.size} bytes, more than ${MAX_LABEL_FILE_BYTES}`);
    const text = (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
    const list = text === '' ? [] : text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
    const parsed = LabelListSchema.safeParse(list);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw refuse(`${issue?.path.length ? `line ${Number(issue.path[0]) + 1}: ` : ''}${issue?.message ?? 'not a label list'}`);
    }
    lines[output] = parsed.data;
  }
  return lines;
}
