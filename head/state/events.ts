export type EventKind =
  | 'node-joined'
  | 'node-suspect'
  | 'node-lost'
  | 'node-left'
  | 'actor-ready'
  | 'actor-rejoined'
  | 'actor-adopted'
  | 'head-restored'
  | 'actor-crashed'
  | 'actor-dead'
  | 'deployment-changed'
  | 'deployment-removed'
  | 'deployment-refused'
  | 'scaled'
  | 'scale-failed';

export interface ClusterEvent {
  /** Milliseconds since the epoch. */
  time: number;
  kind: EventKind;
  message: string;
}

/** Kept in memory: enough history for a person looking at the status page, bounded. */
const CAPACITY = 1000;

/** What happened in the cluster, newest last: lifecycle changes and scaling decisions. */
export class EventLog {
  readonly #events: ClusterEvent[] = [];
  readonly #listeners = new Set<(event: ClusterEvent) => void>();

  add(kind: EventKind, message: string): void {
    const event = { time: Date.now(), kind, message };
    this.#events.push(event);
    if (this.#events.length > CAPACITY) this.#events.splice(0, this.#events.length - CAPACITY);
    for (const listener of this.#listeners) listener(event);
  }

  recent(count = 100): ClusterEvent[] {
    return this.#events.slice(-count);
  }

  /** Calls `listener` for every new event; returns the function that stops it. */
  subscribe(listener: (event: ClusterEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
