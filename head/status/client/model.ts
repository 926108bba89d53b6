import type { StatusDeployment, StatusGraph, StatusUpdate, StatusWindow } from './protocol.js';

/** The page's copy of one window: rows by id and their order, put together from the updates' changes. */
export class WindowModel<T extends { id: string }> {
  readonly #rows = new Map<string, T>();
  #ids: string[] = [];
  total = 0;
  offset = 0;
  viewSeq = 0;
  groups = new Map<string, number>();

  apply(w: StatusWindow<T>): void {
    // Views cross the wire both ways: a window cut for an older view than one applied is stale.
    if (w.viewSeq < this.viewSeq) return;
    this.viewSeq = w.viewSeq;
    if (w.full) this.#rows.clear();
    for (const r of w.rows) this.#rows.set(r.id, r);
    if (w.ids) {
      this.#ids = w.ids;
      const keep = new Set(w.ids);
      for (const id of [...this.#rows.keys()]) if (!keep.has(id)) this.#rows.delete(id);
    }
    this.total = w.total;
    this.offset = w.offset;
    this.groups = new Map((w.groups ?? []).map((g) => [g.key, g.count]));
  }

  /** The window's rows in order (a row the head has not sent yet is left out rather than drawn blank). */
  rows(): T[] {
    return this.#ids.flatMap((id) => {
      const row = this.#rows.get(id);
      return row ? [row] : [];
    });
  }
}

/** What the page knows of the cluster: deployments and graphs in full, nodes and actors a window each. */
export class ClusterModel {
  readonly deployments = new Map<string, StatusDeployment>();
  graphs: StatusGraph[] = [];
  readonly nodes = new WindowModel<StatusUpdate['nodes']['rows'][number]>();
  readonly actors = new WindowModel<StatusUpdate['actors']['rows'][number]>();

  apply(u: StatusUpdate): void {
    if (u.full) {
      // A new connection: its windows are numbered afresh.
      this.deployments.clear();
      this.nodes.viewSeq = 0;
      this.actors.viewSeq = 0;
    }
    for (const d of u.deployments) this.deployments.set(d.name, d);
    for (const name of u.removedDeployments) this.deployments.delete(name);
    if (u.graphs) this.graphs = u.graphs;
    this.nodes.apply(u.nodes);
    this.actors.apply(u.actors);
  }
}
