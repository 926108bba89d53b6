import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { newSecret } from '../../runtime/internal.js';
import { checkBearer, isLoopback } from '../../runtime/internal.js';

export const SESSION_COOKIE = 'troupe_status';
const SESSION_TTL_MS = 12 * 3600_000;
/** Logins kept at once; the oldest goes first. A bound, so logins cannot grow the head's memory. */
const MAX_SESSIONS = 256;

const digest = (s: string) => createHash('sha256').update(s).digest();

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Who may read the status stream. The rule is the one the HTTP API applies to inference: a head
 * with a cluster token that listens beyond loopback requires it; on loopback only local processes
 * can reach the head, and they could read the token anyway.
 *
 * A browser logs in once by posting the token; it gets a random session id in an HttpOnly,
 * SameSite=Strict cookie, so the token itself is never stored by the page, put in a URL, or
 * sent back. Scripts may present `Authorization: Bearer <token>` instead. Sessions live in
 * memory only: a restarted head asks again.
 */
export class StatusSessions {
  readonly required: boolean;
  readonly #token: string | undefined;
  /** sha256(session id) -> expiry; hashed so a heap dump does not hold usable cookies. */
  readonly #sessions = new Map<string, number>();
  /** `; Secure` when the head serves HTTPS: the browser then never sends the cookie over plain HTTP. */
  readonly #secure: string;

  constructor(token: string | undefined, host: string, secure = false) {
    this.#token = token;
    this.required = token !== undefined && token !== '' && !isLoopback(host);
    this.#secure = secure ? '; Secure' : '';
  }

  authorized(headers: IncomingHttpHeaders): boolean {
    if (!this.required) return true;
    if (headers.authorization !== undefined) return checkBearer(headers, this.#token);
    const id = cookieValue(headers.cookie, SESSION_COOKIE);
    if (!id) return false;
    const key = digest(id).toString('hex');
    const expires = this.#sessions.get(key);
    if (expires === undefined) return false;
    if (expires > Date.now()) return true;
    this.#sessions.delete(key);
    return false;
  }

  /** Checks a token typed into the page (constant time); answers the Set-Cookie value, or null. */
  login(candidate: unknown): string | null {
    if (!this.required) return null;
    if (typeof candidate !== 'string' || candidate.length === 0 || candidate.length > 4096) return null;
    if (!timingSafeEqual(digest(candidate), digest(this.#token!))) return null;
    const now = Date.now();
    for (const [key, expires] of this.#sessions) if (expires <= now) this.#sessions.delete(key);
    while (this.#sessions.size >= MAX_SESSIONS) this.#sessions.delete(this.#sessions.keys().next().value!);
    const id = newSecret();
    this.#sessions.set(digest(id).toString('hex'), now + SESSION_TTL_MS);
    return `${SESSION_COOKIE}=${id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_TTL_MS / 1000}${this.#secure}`;
  }

  /** Ends the session in the request's cookie; answers the Set-Cookie value that clears it. */
  logout(headers: IncomingHttpHeaders): string {
    const id = cookieValue(headers.cookie, SESSION_COOKIE);
    if (id) this.#sessions.delete(digest(id).toString('hex'));
    return `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${this.#secure}`;
  }
}
