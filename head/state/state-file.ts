import { lstat, readFile, rename } from 'node:fs/promises';
import type { z } from 'zod';
import { TroupeError } from '../../runtime/internal.js';

/**
 * Reading the head's state file strictly: a file that exists but cannot be read as the state
 * (truncated, empty, not JSON, another schema, a newer format, a symbolic link) stops the head
 * with TROUPE_ERR_STATE_UNREADABLE instead of a warning and an empty start, which lost every
 * deployment, rewrote the file as empty and refused every running actor when it rejoined.
 */

/** The copy of the state as it was before the last write, kept beside it (durable.ts). */
export function previousOf(file: string): string {
  return `${file}.prev`;
}

type Read<T> = { found: false } | { found: true; state: T } | { found: true; problem: string };

/** The state in `file`, nothing when there is none, or what is wrong with it. */
export async function readStateFile<T>(file: string, schema: z.ZodType<T>, format: number): Promise<Read<T>> {
  let stats;
  try {
    stats = await lstat(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { found: false };
    return { found: true, problem: `cannot be read: ${(err as Error).message}` };
  }
  if (stats.isSymbolicLink()) return { found: true, problem: 'is a symbolic link (the head keeps its state in a regular file of its own)' };
  if (!stats.isFile()) return { found: true, problem: 'is not a regular file' };
  if (stats.size === 0) return { found: true, problem: 'is empty' };
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { found: true, problem: `cannot be read: ${(err as Error).message}` };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { found: true, problem: `is not valid JSON, truncated or damaged (${(err as Error).message.slice(0, 200)})` };
  }
  const written = (raw as { format?: unknown } | null)?.format;
  if (typeof written === 'number' && written > format)
    return { found: true, problem: `was written by a newer Troupe (format ${written}; this head reads format ${format})` };
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const at = issue && issue.path.length > 0 ? ` at '${issue.path.join('.')}'` : '';
    return { found: true, problem: `is not a state file of this head${at}: ${issue?.message ?? 'unknown'}` };
  }
  return { found: true, state: parsed.data };
}

/**
 * What stops the head when its state file cannot be read, or, when the operator said to discard it,
 * undefined once the file was set aside (never overwritten: it may be all there is of the cluster).
 */
export async function unreadableState<T>(
  file: string,
  problem: string,
  schema: z.ZodType<T>,
  format: number,
  discard: boolean,
): Promise<{ error: TroupeError } | { setAside: string }> {
  if (discard) {
    const aside = `${file}.discarded-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    await rename(file, aside);
    return { setAside: aside };
  }
  const prev = previousOf(file);
  const before = await readStateFile(prev, schema, format);
  const hint = !before.found
    ? ''
    : 'state' in before
      ? ` ${prev} holds the state as it was before the last write and reads well: move it over ${file} to start from it.`
      : ` ${prev}, the copy before the last write, ${before.problem} too.`;
  return {
    error: new TroupeError(
      'TROUPE_ERR_STATE_UNREADABLE',
      `the head's state file ${file} ${problem}. The head does not start: starting empty would lose the deployments it holds and refuse the actors still running.` +
        `${hint} To start with no deployments instead, pass --discard-state: the file is set aside (renamed, not deleted).`,
    ),
  };
}
