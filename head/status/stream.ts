import type { ServerResponse } from 'node:http';
import { newSecret } from '../../runtime/internal.js';
import type { ActorQuery, NodeQuery } from './client/protocol.js';
import type { EventFeed } from './event-feed.js';
import type { ClusterSampler } from './sampler.js';
import type { StatusFrame } from './frame.js';
import { Viewer } from './viewer.js';

/**
 * Bytes a page may have waiting in its connection before the head stops writing to it. It is
 * not dropped: the updates it misses meanwhile are folded into the next one it can take (each is
 * cut against what the page last got), so the buffer holds at most this plus one update.
 */
const MAX_BUFFERED_BYTES = 256 * 1024;
/** A new view's windows wait this long for other pages' new views, to share one cut of the cluster. */
const VIEW_DELAY_MS = 25;

/**
 * The live feed of the status page, as server-sent events (`event: update`): on connecting, the
 * summary, every deployment, the first page of nodes and of actors, and the whole history the head
 * keeps; then, about once a second and within 50 ms of a lifecycle event, only what changed for
 * that page. A page says which nodes and actors it looks at (`view`): a page of a sorted,
 * filtered list each, so an update's size follows what is on the screen, not the cluster.
 */
export class StatusStream {
  readonly #viewers = new Map<string, Viewer>();
  readonly #frame: () => StatusFrame;
  readonly #sampler: ClusterSampler;
  readonly #feed: EventFeed;
  readonly #maxViewers: number;
  #soon: NodeJS.Timeout | undefined;
  /** Pages whose new view has not been sent yet, and the timer that sends them. */
  readonly #asked = new Set<Viewer>();
  /** Pages an update skipped because their connection held more than MAX_BUFFERED_BYTES: sent again on drain. */
  readonly #held = new WeakSet<Viewer>();
  #viewsSoon: NodeJS.Timeout | undefined;

  constructor(frame: () => StatusFrame, sampler: ClusterSampler, feed: EventFeed, maxViewers = 64) {
    this.#frame = frame;
    this.#sampler = sampler;
    this.#feed = feed;
    this.#maxViewers = maxViewers;
  }

  get viewers(): number {
    return this.#viewers.size;
  }

  /** No room for another page: each costs a cut of the cluster a second. */
  get atCapacity(): boolean {
    return this.#viewers.size >= this.#maxViewers;
  }

  /** Starts streaming to a response whose headers have not been sent. */
  open(res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store, no-transform',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    res.socket?.setNoDelay(true);
    const viewer = new Viewer(newSecret(), res);
    this.#viewers.set(viewer.id, viewer);
    res.on('close', () => this.#viewers.delete(viewer.id));
    // A page held back (its connection full) catches up as soon as it has room: that page alone.
    res.on('drain', () => {
      if (this.#held.delete(viewer) && this.#viewers.has(viewer.id)) this.#send(viewer, this.#frame());
    });
    this.#send(viewer, this.#frame());
  }

  /**
   * Sets what a page looks at; its windows follow within 25 ms, in one cut of the cluster for every
   * page that asked meanwhile (so a flood of view requests costs the head at most 40 cuts a
   * second). False when no open stream has that id. A view older than the page's current one
   * (requests that crossed) is ignored.
   */
  view(id: string, seq: number, nodes: NodeQuery, actors: ActorQuery): boolean {
    const viewer = this.#viewers.get(id);
    if (!viewer) return false;
    if (seq <= viewer.viewSeq) return true;
    viewer.setView(seq, nodes, actors);
    this.#asked.add(viewer);
    this.#viewsSoon ??= setTimeout(() => {
      this.#viewsSoon = undefined;
      const asked = [...this.#asked].filter((v) => this.#viewers.has(v.id));
      this.#asked.clear();
      if (asked.length === 0) return;
      const frame = this.#frame();
      for (const v of asked) this.#send(v, frame);
    }, VIEW_DELAY_MS);
    return true;
  }

  /** Pushes the cluster as it is now to every page. */
  push(): void {
    clearTimeout(this.#soon);
    this.#soon = undefined;
    if (this.#viewers.size === 0) return;
    const frame = this.#frame();
    for (const viewer of this.#viewers.values()) this.#send(viewer, frame);
  }

  /** Pushes within 50 ms, once however many changes happen meanwhile: lifecycle events show at once. */
  pushSoon(): void {
    if (this.#soon || this.#viewers.size === 0) return;
    this.#soon = setTimeout(() => this.push(), 50);
    this.#soon.unref();
  }

  close(): void {
    clearTimeout(this.#soon);
    clearTimeout(this.#viewsSoon);
    this.#asked.clear();
    for (const v of this.#viewers.values()) v.res.end();
    this.#viewers.clear();
  }

  #send(viewer: Viewer, frame: StatusFrame): void {
    if (viewer.res.destroyed) return;
    if (viewer.res.writableLength > MAX_BUFFERED_BYTES) {
      this.#held.add(viewer);
      return;
    }
    const update = viewer.update(frame, this.#sampler, this.#feed);
    viewer.res.write(`event: update\ndata: ${JSON.stringify(update)}\n\n`);
  }
}
