/** The group of calls whose methods name none (its limit is the spec's maxConcurrency). */
export const DEFAULT_GROUP = 'default';

interface Job {
  /** Arrival order across all groups: an exclusive job is a barrier in it. */
  seq: number;
  start: () => void;
}

interface Group {
  readonly limit: number;
  running: number;
  readonly waiting: Job[];
}

/** How many jobs of one group run and wait. */
export interface GroupLoad {
  limit: number;
  running: number;
  waiting: number;
}

function checkLimit(limit: number, group: string): void {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`the slot limit of group '${group}' is a whole number of at least 1, got ${limit}`);
}

/**
 * The calls of one class instance, in concurrency groups (Ray's concurrency_groups): each group
 * runs up to its own limit at once, its jobs started strictly in the order they arrived (a job
 * never overtakes one of its group that waits, so with a limit of 1 each starts after the one
 * before it ended, however it ended), and never waits behind another group's. Without named
 * groups there is one, `default`. An exclusive job (a restore) is a barrier across all groups:
 * it starts once every job that arrived before it ended, and none that arrived after it starts
 * until it ends, so it runs alone.
 */
export class Slots {
  readonly #groups = new Map<string, Group>();
  /** Exclusive jobs waiting, in arrival order. */
  readonly #exclusives: Job[] = [];
  #seq = 0;
  #running = 0;
  #exclusive = false;

  /** `limit` is the default group's; `groups` the named groups' limits. */
  constructor(limit: number, groups: Readonly<Record<string, number>> = {}) {
    for (const [name, n] of [[DEFAULT_GROUP, limit] as const, ...Object.entries(groups)]) {
      checkLimit(n, name);
      this.#groups.set(name, { limit: n, running: 0, waiting: [] });
    }
  }

  /** Jobs waiting or running, in every group. */
  get queued(): number {
    let waiting = this.#exclusives.length;
    for (const g of this.#groups.values()) waiting += g.waiting.length;
    return waiting + this.#running;
  }

  /** Jobs running now, in every group. */
  get running(): number {
    return this.#running;
  }

  /** Each group's limit and the jobs it runs and holds waiting. */
  load(): Record<string, GroupLoad> {
    return Object.fromEntries(
      [...this.#groups].map(([name, g]) => [name, { limit: g.limit, running: g.running, waiting: g.waiting.length }]),
    );
  }

  /**
   * Runs `work` once its group has a free slot and every job of the group before it has started
   * (an exclusive job: once every job before it ended); settles as it does. A job whose `signal`
   * aborts while it waits leaves the queue unrun and rejects with the signal's reason (once
   * started, stopping is `work`'s business).
   */
  run<T>(exclusive: boolean, work: () => Promise<T>, signal?: AbortSignal, group: string = DEFAULT_GROUP): Promise<T> {
    const g = this.#groups.get(group);
    if (!g) return Promise.reject(new RangeError(`no concurrency group '${group}'`));
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const queue = exclusive ? this.#exclusives : g.waiting;
    return new Promise<T>((resolve, reject) => {
      const drop = () => {
        const at = queue.indexOf(job);
        if (at < 0) return;
        queue.splice(at, 1);
        reject(signal!.reason as Error);
        // A job that left may have held the ones behind it back (an exclusive one, every group).
        this.#drain();
      };
      const job: Job = {
        seq: this.#seq++,
        start: () => {
          signal?.removeEventListener('abort', drop);
          this.#running++;
          if (exclusive) this.#exclusive = true;
          else g.running++;
          // A job that throws synchronously frees its slot as one that rejects does.
          Promise.resolve()
            .then(work)
            .then(resolve, reject)
            .finally(() => {
              this.#running--;
              if (exclusive) this.#exclusive = false;
              else g.running--;
              this.#drain();
            });
        },
      };
      signal?.addEventListener('abort', drop, { once: true });
      queue.push(job);
      this.#drain();
    });
  }

  #drain(): void {
    if (this.#exclusive) return;
    const barrier = this.#exclusives[0]?.seq ?? Infinity;
    let before = false;
    for (const g of this.#groups.values()) {
      while (g.waiting.length > 0 && g.running < g.limit && g.waiting[0]!.seq < barrier) g.waiting.shift()!.start();
      if (g.waiting.length > 0 && g.waiting[0]!.seq < barrier) before = true;
    }
    // The barrier goes once everything that arrived before it has run.
    if (this.#exclusives.length > 0 && this.#running === 0 && !before) this.#exclusives.shift()!.start();
  }
}
