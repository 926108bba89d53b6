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
