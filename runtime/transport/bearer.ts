import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Checks `Authorization: Bearer <token>` in constant time (hashing first makes the lengths equal,
 * so the comparison leaks neither the token nor its length). No configured token: all pass.
 */
export function checkBearer(headers: IncomingHttpHeaders, token: string | undefined): boolean {
  if (!token) return true;
  const header = headers.authorization;
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false;
  return sameSecret(header.slice('Bearer '.length), token);
}

/** Whether `given` is `secret`, compared in constant time. */
export function sameSecret(given: string, secret: string): boolean {
  return timingSafeEqual(digest(given), digest(secret));
}
