import type { ServerResponse } from 'node:http';
import type { ActorQuery, NodeQuery, StatusUpdate, StatusWindow } from './client/protocol.js';
import type { EventFeed } from './event-feed.js';
import type { ClusterSampler } from './sampler.js';
import type { StatusFrame } from './frame.js';
import { DEFAULT_ACTOR_QUERY, DEFAULT_NODE_QUERY, actorWindow, nodeWindow } from './windows.js';
import type { Cut } from './windows.js';
import { chartedSeries } from './charted.js';

/** What a page was last sent of one window: its order, and each row as sent (JSON), by id. */
class SentWindow {
  ids = '';
  readonly rows = new Map<string, string>();
  full = true;

  /** The window as an update: every row when full, else the rows that differ from what the page has. */
  diff<T extends { id: string }>(viewSeq: number, cut: Cut<unknown>, rows: T[], groups?: Cut<unknown>['groups']): StatusWindow<T> {
    const ids = rows.map((r) => r.id);
    const order = ids.join('\n');
    const changed: T[] = [];
    const now = new Map<string, string>();
    for (const row of rows) {
      const json = JSON.stringify(row);
      now.set(row.id, json);
      if (this.full || this.rows.get(row.id) !== json) changed.push(row);
    }
    const window: StatusWindow<T> = { viewSeq, full: this.full, total: cut.total, offset: cut.offset, rows: changed };
    if (this.full || order !== this.ids) window.ids = ids;
    if (groups) window.groups = groups;
    this.ids = order;
    this.rows.clear();
    for (const [id, json] of now) this.rows.set(id, json);
    this.full = false;
    return window;
  }
}

/**
 * One page reading the stream: what it asked to see and what it has been sent, so each update
 * carries only what changed for it. An update it could not take (its connection was still full)
 * is simply not made: the next one is cut against what it last got, so a slow page gets the
 * changes of several seconds in one update instead of a queue of them.
 */
export class Viewer {
  readonly id: string;
  readonly res: ServerResponse;
  viewSeq = 0;
  nodes: NodeQuery = DEFAULT_NODE_QUERY;
  actors: ActorQuery = DEFAULT_ACTOR_QUERY;
  #fresh = true;
  #seriesSeq = 0;
  #seriesKey = '';
  #eventSeq = 0;
  #graphs = '';
  readonly #deployments = new Map<string, string>();
  readonly #nodeRows = new SentWindow();
  readonly #actorRows = new SentWindow();

  constructor(id: string, res: ServerResponse) {
    this.id = id;
    this.res = res;
  }

  /** A new view: its windows go whole in the next update. */
  setView(seq: number, nodes: NodeQuery, actors: ActorQuery): void {
    this.viewSeq = seq;
    this.nodes = nodes;
    this.actors = actors;
    this.#nodeRows.full = true;
    this.#actorRows.full = true;
  }

  /** The next update for this page, and from now on what it has. */
  update(frame: StatusFrame, sampler: ClusterSampler, feed: EventFeed): StatusUpdate {
    const full = this.#fresh;
    const charted = chartedSeries(sampler.subjects);
    const seriesFull = full || charted.key !== this.#seriesKey;
    const series = sampler.store.since(seriesFull ? 0 : this.#seriesSeq, charted.include);
    const events = feed.since(this.#eventSeq);

    const deployments = frame.deployments.filter((d) => {
      const json = frame.once(`deployment:${d.name}`, () => JSON.stringify(d));
      if (!full && this.#deployments.get(d.name) === json) return false;
      this.#deployments.set(d.name, json);
      return true;
    });
    const live = new Set(frame.deployments.map((d) => d.name));
    const removedDeployments = [...this.#deployments.keys()].filter((name) => !live.has(name));
    for (const name of removedDeployments) this.#deployments.delete(name);
    const graphs = JSON.stringify(frame.graphs);

    const nodeCut = frame.once(`nodes:${JSON.stringify(this.nodes)}`, () => nodeWindow(frame, this.nodes));
    const actorCut = frame.once(`actors:${JSON.stringify(this.actors)}`, () => actorWindow(frame, this.actors));
    const update: StatusUpdate = {
      ...frame.shared,
      full,
      historySeconds: sampler.store.capacity,
      deployments,
      removedDeployments,
      nodes: this.#nodeRows.diff(
        this.viewSeq,
        nodeCut,
        nodeCut.records.map((n) => frame.nodeRow(n)),
      ),
      actors: this.#actorRows.diff(
        this.viewSeq,
        actorCut,
        actorCut.records.map((a) => frame.actorRow(a)),
        actorCut.groups,
      ),
      series: { times: series.times, values: series.values },
      seriesFull,
      events,
    };
    if (full) update.viewer = this.id;
    if (full || graphs !== this.#graphs) update.graphs = frame.graphs;
    this.#graphs = graphs;
    this.#fresh = false;
    this.#seriesSeq = series.seq;
    this.#seriesKey = charted.key;
    this.#eventSeq = feed.seq;
    return update;
  }
}
