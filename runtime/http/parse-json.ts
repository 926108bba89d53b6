import type { z } from 'zod';
import { TroupeError } from '../errors.js';

export function firstLine(message: string): string {
  return message.split('\n')[0]!.slice(0, 300);
}

/** Parses JSON text, naming the problem: `body is not valid JSON: Unexpected token …`. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_REQUEST', `${what} is not valid JSON: ${firstLine((err as Error).message)}`);
  }
}

/** `value` checked with `schema`, or TROUPE_ERR_BAD_REQUEST naming the first field of `the ${what}` that does not fit. */
export function checkedBy<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new TroupeError(
    'TROUPE_ERR_BAD_REQUEST',
    `the ${what} is invalid at '${issue.path.map(String).join('.') || '(root)'}': ${issue.message}`,
  );
}
