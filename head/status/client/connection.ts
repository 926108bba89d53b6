import type { ActorQuery, NodeQuery, StatusSession, StatusUpdate } from './protocol.js';

export type LinkState =
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'down'; retryAt: number; attempt: number; why: string }
  | { kind: 'login'; error: string | null };

/** The head pushes about once a second; this long without a message means the link is dead. */
const STALE_MS = 5000;
const MAX_RETRY_MS = 5000;

/**
 * The page's link to the head: checks whether a login is needed, opens the event stream, and
 * reconnects by itself when it drops (the head restarted, the network went away, the laptop
 * slept), backing off from 1 s to 5 s. A stream that stops delivering counts as dropped too,
 * since a half-open TCP connection would never fire an error.
 */
export class HeadLink {
  readonly #onUpdate: (u: StatusUpdate) => void;
  readonly #onState: (s: LinkState) => void;
  #source: EventSource | undefined;
  #attempt = 0;
  #lastMessage = 0;
  #retry: number | undefined;
  readonly #watchdog: number;
  /** The id the head gave this connection's stream, for views. */
  #viewer: string | undefined;
  #viewSeq = 0;

  constructor(onUpdate: (u: StatusUpdate) => void, onState: (s: LinkState) => void) {
    this.#onUpdate = onUpdate;
    this.#onState = onState;
    this.#watchdog = window.setInterval(() => {
      if (this.#source && this.#lastMessage > 0 && Date.now() - this.#lastMessage > STALE_MS)
        this.#dropped('no update from the head for 5 s');
    }, 1000);
  }

  start(): void {
    void this.#connect();
  }

  /** Sends the cluster token once; the head answers with a session cookie the page cannot read. */
  async login(token: string): Promise<void> {
    const res = await fetch('/status/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
      credentials: 'same-origin',
    });
    if (res.ok) {
      void this.#connect();
      return;
    }
    this.#onState({ kind: 'login', error: res.status === 401 ? 'That is not the cluster token.' : `The head answered ${res.status}.` });
  }

  /**
   * Tells the head which nodes and actors this page looks at; the stream then sends those windows
   * (carrying the number answered here, so a late window of an older view is known as such).
   * Answers 0 when there is no stream to tell yet: its first update has the default view, and the
   * page asks again on every (re)connect.
   */
  view(nodes: NodeQuery, actors: ActorQuery): number {
    if (!this.#viewer) return 0;
    const seq = ++this.#viewSeq;
    const body = JSON.stringify({ viewer: this.#viewer, seq, nodes, actors });
    // A refused view (the stream just dropped) is retried by the reconnect, which asks again.
    void fetch('/api/v1/stream/view', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      credentials: 'same-origin',
    }).catch(() => undefined);
    return seq;
  }

  stop(): void {
    window.clearInterval(this.#watchdog);
    window.clearTimeout(this.#retry);
    this.#source?.close();
  }

  async #connect(): Promise<void> {
    window.clearTimeout(this.#retry);
    this.#source?.close();
    this.#source = undefined;
    this.#viewer = undefined;
    this.#onState({ kind: 'connecting' });
    let session: StatusSession;
    try {
      const res = await fetch('/status/session', { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok) throw new Error(`the head answered ${res.status}`);
      session = (await res.json()) as StatusSession;
    } catch (err) {
      this.#dropped(`cannot reach the head (${(err as Error).message})`);
      return;
    }
    if (session.required && !session.authorized) {
      this.#onState({ kind: 'login', error: null });
      return;
    }
    const source = new EventSource('/api/v1/stream');
    this.#source = source;
    this.#lastMessage = 0;
    source.addEventListener('update', (e) => {
      if (source !== this.#source) return;
      if (this.#lastMessage === 0) {
        this.#attempt = 0;
        this.#onState({ kind: 'live' });
      }
      this.#lastMessage = Date.now();
      const update = JSON.parse((e as MessageEvent<string>).data) as StatusUpdate;
      if (update.viewer) this.#viewer = update.viewer;
      this.#onUpdate(update);
    });
    // EventSource retries some failures itself and gives up on others (any non-200 answer);
    // one policy for all: close, say so, and start over from the session check.
    source.onerror = () => {
      if (source === this.#source) this.#dropped('the connection to the head was lost');
    };
  }

  #dropped(why: string): void {
    this.#source?.close();
    this.#source = undefined;
    this.#viewer = undefined;
    this.#lastMessage = 0;
    window.clearTimeout(this.#retry);
    const delay = Math.min(1000 * 2 ** this.#attempt, MAX_RETRY_MS);
    this.#attempt++;
    this.#onState({ kind: 'down', retryAt: Date.now() + delay, attempt: this.#attempt, why });
    this.#retry = window.setTimeout(() => void this.#connect(), delay);
  }
}
