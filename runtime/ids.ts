import { customAlphabet, nanoid } from 'nanoid';

/** Short ids that are safe in URLs, file names and log lines. */
export const newId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 12);

/** Secrets handed to actors so only processes we started can join as them. */
export function newSecret(): string {
  return nanoid(32);
}
