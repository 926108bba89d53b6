import { TroupeError, newId, toWireError } from '../../runtime/internal.js';
import type { WireError } from '../../runtime/internal.js';

/**
 * Async jobs: a run accepted now, answered later (what people otherwise build with a task queue
 * in front of an inference server). A job is QUEUED until one of `concurrency` run slots is free,
 * RUNNING while its deployment or graph works on it, then SUCCEEDED (with its result), FAILED
 * (with the error) or CANCELLED. Finished jobs are kept for `ttlMs`, and at most `maxJobs` of them
 * holding at most `maxBytes` of results: past a bound the oldest finished job goes. Unfinished
 * jobs are never dropped; there are at most `maxPending` of them, and past that new ones are
 * refused with TROUPE_ERR_OVERLOADED.
 */

export type JobState = 'QUEUED' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

export interface JobOptions {
  /** How long a finished job (and its result) stays readable. */
  ttlMs: number;
  /** Finished jobs kept, at most. */
  maxJobs: number;
  /** Bytes of results kept, at most; a single result above it fails its job. */
  maxBytes: number;
  /** Jobs running at once; the rest wait QUEUED. */
  concurrency: number;
  /** Jobs queued or running, at most. */
  maxPending: number;
}

export const DEFAULT_JOB_OPTIONS: JobOptions = {
  ttlMs: 3_600_000,
  maxJobs: 1000,
  maxBytes: 256 * 2 ** 20,
  concurrency: 32,
  maxPending: 1024,
};

/** A job as callers see it; `result` (the OIP response) is spliced in as JSON text, see {@link jobJson}. */
export interface JobView {
  id: string;
  deployment: string;
  state: JobState;
  created: string;
  started: string | null;
  finished: string | null;
  error?: WireError;
}

/** The work of one job: resolves with its result, already encoded as JSON text. */
export type JobWork = () => Promise<string>;

interface Job {
  id: string;
  deployment: string;
  state: JobState;
  created: number;
  started: number | null;
  finished: number | null;
  work: JobWork | null;
  result: string | null;
  error: WireError | null;
  bytes: number;
}

const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());

/** A job as JSON text, with its result (already JSON) spliced in rather than parsed and re-encoded. */
export function jobJson(view: JobView, result: string | null): string {
  const head = JSON.stringify(view);
  return result === null ? head : `${head.slice(0, -1)},"result":${result}}`;
}

export class JobStore {
  readonly #options: JobOptions;
  readonly #jobs = new Map<string, Job>();
  /** Waiting jobs, oldest first. */
  readonly #queue: Job[] = [];
  /** Finished jobs in the order they finished: the oldest is the first to go. */
  readonly #finished = new Set<Job>();
  #running = 0;
  #pending = 0;
  #bytes = 0;
  readonly #now: () => number;

  /** `now` is the clock retention is measured by (tests pass their own). */
  constructor(options: Partial<JobOptions> = {}, now: () => number = Date.now) {
    this.#options = { ...DEFAULT_JOB_OPTIONS, ...options };
    this.#now = now;
  }

  /** Jobs by state of life, and the bytes of results held. */
  get size(): { pending: number; running: number; finished: number; bytes: number } {
    return { pending: this.#pending, running: this.#running, finished: this.#finished.size, bytes: this.#bytes };
  }

  /** Accepts a job; it starts at once if a run slot is free. */
  submit(deployment: string, work: JobWork): JobView {
    this.#evict();
    if (this.#pending >= this.#options.maxPending) {
      throw new TroupeError('TROUPE_ERR_OVERLOADED', `${this.#pending} jobs are queued or running (the most this head takes); retry later`);
    }
    const job: Job = {
      id: newId(),
      deployment,
      state: 'QUEUED',
      created: this.#now(),
      started: null,
      finished: null,
      work,
      result: null,
      error: null,
      bytes: 0,
    };
    this.#jobs.set(job.id, job);
    this.#pending++;
    this.#queue.push(job);
    this.#pump();
    return this.#view(job);
  }

  /** A job and its result (JSON text, or null until it succeeded); TROUPE_ERR_UNKNOWN_JOB if none. */
  get(id: string): { view: JobView; result: string | null } {
    this.#evict();
    const job = this.#find(id);
    return { view: this.#view(job), result: job.result };
  }

  /**
   * Cancels an unfinished job: a queued one never runs; a running one's work is not interrupted
   * (calls already sent to actors finish there) but its outcome is dropped. A finished job is
   * deleted, result and all. Returns the job as it is after that.
   */
  cancel(id: string): JobView {
    this.#evict();
    const job = this.#find(id);
    if (job.state === 'QUEUED' || job.state === 'RUNNING') {
      if (job.state === 'QUEUED') {
        this.#pending--;
        this.#queue.splice(this.#queue.indexOf(job), 1);
      }
      job.state = 'CANCELLED';
      job.work = null;
      this.#finish(job);
      return this.#view(job);
    }
    this.#forget(job);
    return this.#view(job);
  }

  #find(id: string): Job {
    const job = this.#jobs.get(id);
    if (!job) {
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_JOB',
        `no job '${id.slice(0, 64)}': never created, or dropped ${Math.round(this.#options.ttlMs / 1000)} s after it finished or to make room for newer ones`,
      );
    }
    return job;
  }

  #view(job: Job): JobView {
    return {
      id: job.id,
      deployment: job.deployment,
      state: job.state,
      created: iso(job.created)!,
      started: iso(job.started),
      finished: iso(job.finished),
      ...(job.error ? { error: job.error } : {}),
    };
  }

  #pump(): void {
    while (this.#running < this.#options.concurrency && this.#queue.length > 0) {
      const job = this.#queue.shift()!;
      const work = job.work!;
      job.work = null;
      job.state = 'RUNNING';
      job.started = this.#now();
      this.#running++;
      // A cancelled job's work still holds its slot until it settles: it still occupies the cluster.
      Promise.resolve()
        .then(work)
        .then(
          (result) => this.#settle(job, result, null),
          (err: unknown) => this.#settle(job, null, toWireError(err)),
        )
        .finally(() => {
          this.#running--;
          this.#pump();
        });
    }
  }

  #settle(job: Job, result: string | null, error: WireError | null): void {
    if (job.state !== 'RUNNING') return; // cancelled meanwhile: the outcome is dropped
    this.#pending--;
    const bytes = result === null ? 0 : Buffer.byteLength(result);
    if (bytes > this.#options.maxBytes) {
      job.state = 'FAILED';
      job.error = {
        code: 'TROUPE_ERR_RESULT_TOO_LARGE',
        message: `the result is ${bytes} bytes; this head keeps at most ${this.#options.maxBytes} bytes of job results (--max-job-mib)`,
      };
    } else if (error) {
      job.state = 'FAILED';
      job.error = error;
    } else {
      job.state = 'SUCCEEDED';
      job.result = result;
      job.bytes = bytes;
      this.#bytes += bytes;
    }
    this.#finish(job);
  }

  #finish(job: Job): void {
    job.finished = this.#now();
    this.#finished.add(job);
    this.#evict();
  }

  #forget(job: Job): void {
    this.#jobs.delete(job.id);
    if (this.#finished.delete(job)) this.#bytes -= job.bytes;
  }

  /** Drops finished jobs past their TTL, then the oldest while a bound is exceeded. O(1) amortised. */
  #evict(): void {
    const now = this.#now();
    for (const job of this.#finished) {
      const expired = now - job.finished! >= this.#options.ttlMs;
      if (!expired && this.#finished.size <= this.#options.maxJobs && this.#bytes <= this.#options.maxBytes) break;
      this.#forget(job);
    }
  }
}
