import assert from 'node:assert/strict';
import type {
  ActorQuery,
  NodeQuery,
  StatusActor,
  StatusDeployment,
  StatusGraph,
  StatusNode,
  StatusUpdate,
  StatusWindow,
} from '../../head/status/client/protocol.js';

/** What a page knows after an update: deployments and its windows put together from every update so far. */
export interface StatusSeen {
  /** The update itself, as sent. */
  update: StatusUpdate;
  full: boolean;
  time: number;
  historySeconds: number;
  summary: StatusUpdate['summary'];
  readiness: StatusUpdate['readiness'];
  deployments: StatusDeployment[];
  graphs: StatusGraph[];
  /** The nodes window, in order, and how many nodes match its filter. */
  nodes: StatusNode[];
  nodesTotal: number;
  actors: StatusActor[];
  actorsTotal: number;
  actorsViewSeq: number;
  /** This update's new samples and events only. */
  series: StatusUpdate['series'];
  events: StatusUpdate['events'];
}

class WindowCopy<T extends { id: string }> {
  rows = new Map<string, T>();
  ids: string[] = [];
  total = 0;
  viewSeq = 0;

  apply(w: StatusWindow<T>): void {
    // A window for an older view than one already applied is late: the page ignores it.
    if (w.viewSeq < this.viewSeq) return;
    this.viewSeq = w.viewSeq;
    if (w.full) this.rows.clear();
    for (const r of w.rows) this.rows.set(r.id, r);
    if (w.ids) this.ids = w.ids;
    for (const id of [...this.rows.keys()]) if (!this.ids.includes(id)) this.rows.delete(id);
    assert.ok(
      this.ids.every((id) => this.rows.has(id)),
      `every row of the window was sent: ${this.ids.filter((id) => !this.rows.has(id)).join(', ')}`,
    );
    this.total = w.total;
  }

  list(): T[] {
    return this.ids.map((id) => this.rows.get(id)!);
  }
}

/** The status stream of a head, read as the page reads it: one `update` event at a time, applied to what came before. */
export class StreamReader {
  readonly #url: string;
  readonly #abort = new AbortController();
  readonly #reader: Promise<ReadableStreamDefaultReader<Uint8Array>>;
  #buffer = '';
  readonly #decoder = new TextDecoder();
  readonly #deployments = new Map<string, StatusDeployment>();
  #graphs: StatusGraph[] = [];
  readonly #nodes = new WindowCopy<StatusNode>();
  readonly #actors = new WindowCopy<StatusActor>();
  #viewer: string | undefined;
  #viewSeq = 0;
  /** Bytes of the stream read so far, and updates. */
  bytes = 0;
  updates = 0;

  constructor(url: string, headers: Record<string, string> = {}) {
    this.#url = url;
    this.#reader = fetch(`${url}/api/v1/stream`, { signal: this.#abort.signal, headers }).then((res) => {
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
      return res.body!.getReader();
    });
  }

  /** The next update, applied, or a failure after `timeoutMs`. */
  async next(timeoutMs = 10_000): Promise<StatusSeen> {
    const reader = await this.#reader;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end >= 0) {
        const frame = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const data = frame.split('\n').find((l) => l.startsWith('data: '));
        assert.match(frame, /^event: update\n/);
        this.updates++;
        return this.#apply(JSON.parse(data!.slice('data: '.length)) as StatusUpdate);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no update within ${timeoutMs} ms`);
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        reader.read(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no update within ${timeoutMs} ms`)), left))),
      ]).finally(() => clearTimeout(timer));
      if (chunk.done) throw new Error('the stream ended');
      this.bytes += chunk.value.byteLength;
      this.#buffer += this.#decoder.decode(chunk.value, { stream: true });
    }
  }

  #apply(u: StatusUpdate): StatusSeen {
    if (u.full) {
      this.#deployments.clear();
      assert.ok(u.viewer, 'the first update names the viewer');
      this.#viewer = u.viewer;
    }
    for (const d of u.deployments) this.#deployments.set(d.name, d);
    for (const name of u.removedDeployments) this.#deployments.delete(name);
    if (u.graphs) this.#graphs = u.graphs;
    this.#nodes.apply(u.nodes);
    this.#actors.apply(u.actors);
    return {
      update: u,
      full: u.full,
      time: u.time,
      historySeconds: u.historySeconds,
      summary: u.summary,
      readiness: u.readiness,
      deployments: [...this.#deployments.values()],
      graphs: this.#graphs,
      nodes: this.#nodes.list(),
      nodesTotal: this.#nodes.total,
      actors: this.#actors.list(),
      actorsTotal: this.#actors.total,
      actorsViewSeq: this.#actors.viewSeq,
      series: u.series,
      events: u.events,
    };
  }

  /** The id the stream's first update gave this reader (after `next()` has read it). */
  get viewer(): string | undefined {
    return this.#viewer;
  }

  /** Asks for other windows (POST /api/v1/stream/view); answers the view's number, which later windows carry. */
  async view(nodes: NodeQuery, actors: ActorQuery, headers: Record<string, string> = {}): Promise<number> {
    assert.ok(this.#viewer, 'read the first update before asking for a view');
    const seq = ++this.#viewSeq;
    const res = await fetch(`${this.#url}/api/v1/stream/view`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ viewer: this.#viewer, seq, nodes, actors }),
    });
    assert.equal(res.status, 204, await res.text());
    return seq;
  }

  /** Reads updates until `check` accepts one; bounded. */
  async until<T>(what: string, check: (s: StatusSeen) => T | undefined | false, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      const found = check(await this.next(left));
      if (found !== undefined && found !== false) return found;
    }
  }

  close(): void {
    this.#abort.abort();
  }
}
