/**
 * The generator's sessions: each one's recurrent state, kept between calls, forgotten after an
 * idle time or when there are too many (the least recently used first). Eviction happens when a
 * session is looked up or opened, never on a timer: an actor runs one call at a time, so nothing
 * changes between calls, and a timer would only add work to the actor's event loop.
 */

/** One conversation: the state the model is in, and the token decided but not yet fed to it. */
export interface Session {
  state: Float32Array;
  /** The last token generated (or '\n' for a fresh session): the next step feeds it. */
  pending: number;
  /** Tokens fed to the model in this session so far. */
  steps: number;
  usedAt: number;
}

/** A session as `sessions()` reports it. */
export interface SessionInfo {
  session: string;
  steps: number;
  idleMs: number;
}

export interface SessionLimits {
  /** Sessions kept at most; past it the least recently used is forgotten. */
  maxSessions: number;
  /** A session unused this long is forgotten. */
  idleMs: number;
}

export class SessionStore {
  // A Map iterates in insertion order; a session is re-inserted on every use, so the first entry
  // is always the least recently used one.
  readonly #sessions = new Map<string, Session>();
  readonly #limits: SessionLimits;
  readonly #now: () => number;

  constructor(limits: SessionLimits, now: () => number = () => performance.now()) {
    this.#limits = limits;
    this.#now = now;
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** The session `key`, marked used now; undefined if it never was, or was forgotten. */
  get(key: string): Session | undefined {
    this.#expire();
    const session = this.#sessions.get(key);
    if (session) this.#touch(key, session);
    return session;
  }

  /** The session `key`, made with `fresh()` (forgetting the least recently used past the cap) if there is none. */
  open(key: string, fresh: () => Omit<Session, 'usedAt'>): Session {
    const known = this.get(key);
    if (known) return known;
    while (this.#sessions.size >= this.#limits.maxSessions) this.#sessions.delete(this.#sessions.keys().next().value!);
    const session = { ...fresh(), usedAt: this.#now() };
    this.#sessions.set(key, session);
    return session;
  }

  /** Puts back a session as it was saved (a restore), without evicting: the saved set was within the limits. */
  put(key: string, session: Omit<Session, 'usedAt'>): void {
    this.#sessions.set(key, { ...session, usedAt: this.#now() });
  }

  delete(key: string): boolean {
    return this.#sessions.delete(key);
  }

  /** Every live session, least recently used first. */
  entries(): [string, Session][] {
    this.#expire();
    return [...this.#sessions];
  }

  list(): SessionInfo[] {
    const now = this.#now();
    return this.entries().map(([session, s]) => ({ session, steps: s.steps, idleMs: Math.round(now - s.usedAt) }));
  }

  #touch(key: string, session: Session): void {
    session.usedAt = this.#now();
    this.#sessions.delete(key);
    this.#sessions.set(key, session);
  }

  #expire(): void {
    const cutoff = this.#now() - this.#limits.idleMs;
    for (const [key, session] of this.#sessions) {
      if (session.usedAt > cutoff) break;
      this.#sessions.delete(key);
    }
  }
}
