import type { ServerResponse } from 'node:http';
import type { StatusSnapshot } from './client/protocol.js';
import type { EventFeed } from './event-feed.js';
import type { ClusterSampler } from './sampler.js';
import type { SnapshotBase } from './snapshot.js';

/** A page that stopped reading (a sleeping laptop) is dropped past this; it reconnects for a full snapshot. */
const MAX_BUFFERED_BYTES = 4 * 2 ** 20;

interface Viewer {
  res: ServerResponse;
  /** Nothing sent yet: the next snapshot carries the whole history. */
  fresh: boolean;
  /** What this page already has: series samples and events up to these numbers. */
  seriesSeq: number;
  eventSeq: number;
}

/**
 * The live feed of the status page, as server-sent events: one `snapshot` event on connecting
 * with the whole history the head keeps, then one per push with the cluster as it is now plus
 * only the series samples and events this page does not have yet.
 */
export class StatusStream {
  readonly #viewers = new Set<Viewer>();
  readonly #base: () => SnapshotBase;
  readonly #sampler: ClusterSampler;
  readonly #feed: EventFeed;
  readonly #maxViewers: number;
  #soon: NodeJS.Timeout | undefined;

  constructor(base: () => SnapshotBase, sampler: ClusterSampler, feed: EventFeed, maxViewers = 64) {
    this.#base = base;
    this.#sampler = sampler;
    this.#feed = feed;
    this.#maxViewers = maxViewers;
  }

  get viewers(): number {
    return this.#viewers.size;
  }

  /** No room for another page: each costs a snapshot a second. */
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
    const viewer: Viewer = { res, fresh: true, seriesSeq: 0, eventSeq: 0 };
    this.#viewers.add(viewer);
    res.on('close', () => this.#viewers.delete(viewer));
    this.#send([viewer], this.#base());
  }

  /** Pushes the cluster as it is now to every page. */
  push(): void {
    clearTimeout(this.#soon);
    this.#soon = undefined;
    if (this.#viewers.size === 0) return;
    const base = this.#base();
    // Pages connected at different moments lack different samples; most share the same marks.
    const groups = new Map<string, Viewer[]>();
    for (const v of this.#viewers) {
      const key = `${v.fresh}:${v.seriesSeq}:${v.eventSeq}`;
      groups.set(key, [...(groups.get(key) ?? []), v]);
    }
    for (const viewers of groups.values()) this.#send(viewers, base);
  }

  /** Pushes within 50 ms, once however many changes happen meanwhile: lifecycle events show at once. */
  pushSoon(): void {
    if (this.#soon || this.#viewers.size === 0) return;
    this.#soon = setTimeout(() => this.push(), 50);
    this.#soon.unref();
  }

  close(): void {
    clearTimeout(this.#soon);
    for (const v of this.#viewers) v.res.end();
    this.#viewers.clear();
  }

  #send(viewers: Viewer[], base: SnapshotBase): void {
    const first = viewers[0]!;
    const full = first.fresh;
    const series = this.#sampler.store.since(first.seriesSeq);
    const events = this.#feed.since(first.eventSeq);
    const snapshot: StatusSnapshot = {
      ...base,
      full,
      historySeconds: this.#sampler.store.capacity,
      series: { times: series.times, values: series.values },
      events,
    };
    const frame = `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
    for (const v of viewers) {
      v.fresh = false;
      v.seriesSeq = series.seq;
      v.eventSeq = this.#feed.seq;
      if (v.res.writableLength > MAX_BUFFERED_BYTES) {
        v.res.destroy();
        continue;
      }
      v.res.write(frame);
    }
  }
}
