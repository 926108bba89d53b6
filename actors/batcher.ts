import { TroupeError, concatTensorRows, sharedBufferPool, sharesMemory, splitRows } from '../runtime/internal.js';
import type { CallTiming, Tensor } from '../runtime/internal.js';
import { batchKey, rowsOf } from './batch-tensors.js';
import { CallTotalsRecorder } from './call-totals.js';
import { StayAwake } from './stay-awake.js';

export interface BatcherOptions {
  /** Most rows in one run; 1 runs every call alone. */
  maxSize: number;
  /** With `waitWhenIdle`, how long the first call of a batch may wait for company; otherwise unused. */
  maxDelayMs: number;
  /**
   * The first call of every batch, even one that finds the model idle, waits up to `maxDelayMs`
   * for company or until its batch is full (Triton's and Ray Serve's policy). Off by default:
   * then a call that finds the model idle runs at once, and batches form only from the calls
   * that arrive while the model is busy.
   */
  waitWhenIdle?: boolean | undefined;
  preferredSizes?: readonly number[] | undefined;
  /** False for models without a batch axis: they are never batched. */
  batchable: boolean;
  /** How long the event loop keeps turning after the queue empties (ms; 0 or absent: it may sleep at once; stay-awake.ts). */
  idleSpinMs?: number | undefined;
  /**
   * Runs the model may hold at once (default 1). A model on an inference thread takes 2: while one
   * batch runs, a next batch that is already full goes ahead into the thread's queue, so the
   * session never waits for this thread between runs. Only a full batch goes ahead, since a
   * partial one could still gain calls by waiting: batches form as with one run at a time.
   */
  overlap?: number | undefined;
  /**
   * Runs that go on side by side, each on a session of its own (a model's instances; default 1).
   * While fewer run, the next batch starts at once, full or not, as a lone call does on an idle
   * model; with all of them busy, batches form from the calls that wait. At most `overlap` runs.
   */
  runners?: number | undefined;
  /**
   * Whether one of the model's sessions has no run now. Counting runs is not enough with
   * instances of unequal queues: a batch sent ahead into one session's queue counts as a run while
   * another session is idle. Absent: fewer runs than `runners`.
   */
  idleRunner?: (() => boolean) | undefined;
}

export interface BatcherStats {
  calls: number;
  batches: number;
  rows: number;
  /** Calls dropped unrun because their deadline passed while they waited. */
  expired: number;
  failed: number;
  computeMs: number;
  queueMs: number;
}

/**
 * Runs the model once. `notAfter` (ms since the epoch, `performance.timeOrigin` based) comes only
 * with a run sent ahead while another runs (see `overlap`): a model that has not started it by
 * then rejects with {@link RunNotStarted}, and its calls go back to the queue, where those whose
 * deadline passed are dropped unrun.
 */
export type RunModel = (
  inputs: Record<string, Tensor>,
  outputs: readonly string[] | undefined,
  notAfter?: number,
) => Promise<Record<string, Tensor>>;

/** A run sent ahead was not started: its `notAfter` had passed when its turn came. */
export class RunNotStarted extends Error {}

interface Job {
  inputs: Record<string, Tensor>;
  outputs: readonly string[] | undefined;
  rows: number | null;
  key: string;
  arrived: number;
  deadline: number | undefined;
  resolve: (result: { outputs: Record<string, Tensor>; timing: CallTiming }) => void;
  reject: (error: unknown) => void;
}

const yieldToIo = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Dynamic batching inside the actor, closest to the model. A call that finds the model idle runs
 * at once: batching never costs latency at low load. `session.run` blocks this thread, so calls
 * that arrive during a run wait in the socket; after each run the batcher yields to let them in,
 * then takes the oldest call and every compatible call behind it (same input dtypes, non-batch
 * dims and output selection) up to `maxSize` rows, concatenates them along axis 0, runs once and
 * splits the outputs back. No timer ever holds a call unless `waitWhenIdle` asks for one. Calls
 * whose deadline passed while waiting are dropped unrun.
 */
export class Batcher {
  readonly #run: RunModel;
  readonly #options: BatcherOptions;
  readonly #queue: Job[] = [];
  readonly stats: BatcherStats = { calls: 0, batches: 0, rows: 0, expired: 0, failed: 0, computeMs: 0, queueMs: 0 };
  /** Triton-style per-call and per-batch-size totals (reported with the stats). */
  readonly totals: CallTotalsRecorder;
  #running = false;
  /** Calls in the runs now going on. */
  #inRun = 0;
  #wake: (() => void) | undefined;
  /** Wakes a drain that waits on its runs when a call arrives (only with `overlap` above 1). */
  #arrived: (() => void) | undefined;
  #idleWaiters: (() => void)[] = [];
  readonly #awake: StayAwake;

  /** `totals` may be shared: a multiplexed replica's models all add to the replica's one record. */
  constructor(run: RunModel, options: BatcherOptions, totals = new CallTotalsRecorder()) {
    this.#run = run;
    this.#options = options;
    this.totals = totals;
    this.#awake = new StayAwake(options.idleSpinMs ?? 0);
  }

  /** Whether the event loop is kept turning now, after the last call (stay-awake.ts). */
  get spinning(): boolean {
    return this.#awake.spinning;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** Calls submitted and not yet settled: queued plus running. */
  get outstanding(): number {
    return this.#queue.length + this.#inRun;
  }

  submit(
    inputs: Record<string, Tensor>,
    outputs?: readonly string[],
    timeoutMs?: number,
  ): Promise<{ outputs: Record<string, Tensor>; timing: CallTiming }> {
    return new Promise((resolve, reject) => {
      const arrived = performance.now();
      const rows = this.#options.batchable && this.#options.maxSize > 1 ? rowsOf(inputs) : null;
      this.#queue.push({
        inputs,
        outputs,
        rows,
        key: rows === null ? '' : batchKey(inputs, outputs),
        arrived,
        deadline: timeoutMs === undefined ? undefined : arrived + timeoutMs,
        resolve,
        reject,
      });
      this.#wake?.();
      this.#arrived?.();
      if (!this.#running) void this.#drain();
    });
  }

  /** Resolves once everything submitted so far has run. */
  whenIdle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async #drain(): Promise<void> {
    this.#running = true;
    // One microtask, not a timer: calls submitted in the same turn (several frames in one socket
    // read) join the first call's batch, and a lone call still runs before any timer could fire.
    await Promise.resolve();
    while (this.#queue.length > 0) {
      this.#dropExpired();
      if (this.#queue.length === 0) break;
      await this.#waitForCompany();
      this.#dropExpired();
      const batch = this.#take();
      if (batch.length > 0) await ((this.#options.overlap ?? 1) > 1 ? this.#runOverlapped(batch) : this.#execute(batch));
      await this.#readArrived();
    }
    this.#running = false;
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
    this.#awake.touch();
  }

  /**
   * Runs `batch` and, while runs go on, sends each next batch that is already full after them, up
   * to `overlap` runs at once, and any batch at all while one of `runners` sessions has none;
   * returns when every run started here has ended. Otherwise a partial batch waits for that, as
   * with one run at a time, gathering the calls that arrive meanwhile.
   */
  async #runOverlapped(batch: Job[]): Promise<void> {
    const runs = new Set<Promise<void>>();
    const start = (jobs: Job[]) => {
      // A batch sent ahead must not outlive its calls' deadlines while it waits its turn.
      const deadlines = jobs.flatMap((j) => (runs.size > 0 && j.deadline !== undefined ? [j.deadline] : []));
      const notAfter = deadlines.length > 0 ? performance.timeOrigin + Math.min(...deadlines) : undefined;
      const run: Promise<void> = this.#execute(jobs, notAfter).finally(() => runs.delete(run));
      runs.add(run);
    };
    start(batch);
    while (runs.size > 0) {
      this.#dropExpired();
      if (runs.size < this.#options.overlap! && (this.#fullBatchWaiting() || this.#runnerIdle(runs.size))) {
        start(this.#take());
        continue;
      }
      // Until a run ends, or a call comes that may fill a batch, or a partial batch has waited long enough for an idle session.
      const arrival = new Promise<void>((resolve) => (this.#arrived = resolve));
      let timer: NodeJS.Timeout | undefined;
      const waitOver =
        this.#options.waitWhenIdle && this.#queue.length > 0 && this.#anyRunnerIdle(runs.size)
          ? new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, this.#companyWaitLeftMs()))))
          : undefined;
      await Promise.race([...runs, arrival, ...(waitOver ? [waitOver] : [])]);
      clearTimeout(timer);
      this.#arrived = undefined;
    }
  }

  /**
   * Whether a call waits while one of the model's sessions has no run: the next batch starts on it
   * (with `waitWhenIdle`, once its first call has waited `maxDelayMs` for company; a full one at once).
   */
  #runnerIdle(running: number): boolean {
    if (this.#queue.length === 0 || !this.#anyRunnerIdle(running)) return false;
    return !this.#options.waitWhenIdle || this.#companyWaitLeftMs() <= 0;
  }

  #anyRunnerIdle(running: number): boolean {
    return this.#options.idleRunner ? this.#options.idleRunner() : running < (this.#options.runners ?? 1);
  }

  /** How long the oldest call may still wait for company (`waitWhenIdle`). */
  #companyWaitLeftMs(): number {
    return this.#queue[0]!.arrived + this.#options.maxDelayMs - performance.now();
  }

  /** Whether the oldest call and the compatible ones behind it fill a batch of the target size. */
  #fullBatchWaiting(): boolean {
    const first = this.#queue[0];
    if (!first) return false;
    if (first.rows === null) return true;
    return this.#rowsLike(first) >= this.#target(first);
  }

  /**
   * Lets in the calls that arrived while the model ran. They sit in the socket, and one turn of
   * the event loop reads only part of a large backlog (libuv reads about 2 MB a turn: three
   * images), so it yields again while calls keep coming and the next batch is not yet full:
   * otherwise the batch would go out short (or, with `waitWhenIdle`, wait for calls already here).
   */
  async #readArrived(): Promise<void> {
    let before: number;
    do {
      before = this.#queue.length;
      await yieldToIo();
    } while (this.#queue.length > before && this.#options.maxSize > 1 && this.#queue.length < this.#options.maxSize);
  }

  #dropExpired(): void {
    const now = performance.now();
    for (let i = this.#queue.length - 1; i >= 0; i--) {
      const job = this.#queue[i]!;
      if (job.deadline !== undefined && job.deadline <= now) {
        this.#queue.splice(i, 1);
        this.stats.expired++;
        this.totals.failed([now - job.arrived]);
        job.reject(
          new TroupeError(
            'TROUPE_ERR_DEADLINE_EXCEEDED',
            `deadline passed after ${Math.round(now - job.arrived)} ms in the actor's queue; not run`,
          ),
        );
      }
    }
  }

  /**
   * Only with `waitWhenIdle`: the first call waits until its batch is full or its delay is up.
   * By default nothing waits here, so a lone call at low load pays no delay.
   */
  async #waitForCompany(): Promise<void> {
    const first = this.#queue[0];
    if (!this.#options.waitWhenIdle || !first || first.rows === null || this.#options.maxDelayMs <= 0) return;
    const until = first.arrived + this.#options.maxDelayMs;
    while (this.#queue[0] === first && this.#rowsLike(first) < this.#options.maxSize) {
      const left = until - performance.now();
      if (left <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => (clearTimeout(timer), resolve());
      });
      this.#wake = undefined;
    }
  }

  #rowsLike(first: Job): number {
    let rows = 0;
    for (const job of this.#queue) if (job.key === first.key && job.rows !== null) rows += job.rows;
    return rows;
  }

  /** The oldest call and the compatible calls behind it, up to the target size. */
  #take(): Job[] {
    const first = this.#queue.shift();
    if (!first) return [];
    if (first.rows === null) return [first];
    const limit = this.#target(first);
    const batch = [first];
    let rows = first.rows;
    // One pass that moves the calls left behind forward, then one splice: a splice for each call taken moved the whole queue each time.
    const queue = this.#queue;
    let kept = 0;
    let i = 0;
    for (; i < queue.length && rows < limit; i++) {
      const job = queue[i]!;
      if (job.key === first.key && job.rows !== null && rows + job.rows <= limit) {
        batch.push(job);
        rows += job.rows;
      } else queue[kept++] = job;
    }
    // Slots [kept, i) held calls taken or moved forward.
    if (kept < i) queue.splice(kept, i - kept);
    return batch;
  }

  #target(first: Job): number {
    const { maxSize, preferredSizes } = this.#options;
    if (!preferredSizes?.length) return maxSize;
    const reachable = Math.min(maxSize, first.rows! + this.#rowsLike(first));
    const preferred = preferredSizes.filter((s) => s <= reachable);
    return preferred.length ? Math.max(...preferred) : maxSize;
  }

  async #execute(batch: Job[], notAfter?: number): Promise<void> {
    const start = performance.now();
    const first = batch[0]!;
    this.#inRun += batch.length;
    // The phases are timed apart for the statistics: joining inputs, the run, splitting outputs.
    let ran = start;
    let split: number;
    try {
      let outputs: Record<string, Tensor>[];
      if (batch.length === 1) {
        // A lone call's inputs go to the model as they are: no joining, no splitting.
        outputs = [await this.#run(first.inputs, first.outputs, notAfter)];
        split = performance.now();
      } else {
        const inputs: Record<string, Tensor> = {};
        const copies: Buffer[] = [];
        for (const name of Object.keys(first.inputs)) {
          const joined = concatTensorRows(
            batch.map((j) => j.inputs[name]!),
            sharedBufferPool,
          );
          inputs[name] = joined.tensor;
          if (joined.copy) copies.push(joined.copy);
        }
        ran = performance.now();
        let result: Record<string, Tensor> | undefined;
        try {
          result = await this.#run(inputs, first.outputs, notAfter);
        } finally {
          // The joined inputs are read no more once the run is over (unless an output is one).
          if (!result || !sharesMemory(result, inputs)) for (const copy of copies) sharedBufferPool.give(copy);
        }
        split = performance.now();
        outputs = this.#split(
          result,
          batch.map((j) => j.rows!),
        );
      }
      const end = performance.now();
      const computeMs = end - start;
      const rows = batch.reduce((n, j) => n + (j.rows ?? 1), 0);
      this.stats.batches++;
      this.stats.rows += rows;
      this.stats.computeMs += computeMs;
      const queued = batch.map((job) => start - job.arrived);
      this.totals.executed(queued, rows, { inputMs: ran - start, inferMs: split - ran, outputMs: end - split });
      batch.forEach((job, i) => {
        const queueMs = queued[i]!;
        this.stats.calls++;
        this.stats.queueMs += queueMs;
        job.resolve({ outputs: outputs[i]!, timing: { queueMs, computeMs, batchRows: rows, batchCalls: batch.length } });
      });
    } catch (err) {
      if (err instanceof RunNotStarted) {
        // Back to the head of the queue, oldest first, where the drain drops the expired ones.
        this.#queue.unshift(...batch);
        return;
      }
      this.stats.failed += batch.length;
      const now = performance.now();
      this.totals.failed(batch.map((job) => now - job.arrived));
      for (const job of batch) job.reject(err);
    } finally {
      this.#inRun -= batch.length;
    }
  }

  #split(outputs: Record<string, Tensor>, rows: number[]): Record<string, Tensor>[] {
    const total = rows.reduce((a, b) => a + b, 0);
    const perCall: Record<string, Tensor>[] = rows.map(() => ({}));
    for (const [name, t] of Object.entries(outputs)) {
      if (t.shape[0] !== total) {
        throw new TroupeError(
          'TROUPE_ERR_INFERENCE',
          `output '${name}' has ${t.shape[0]} rows for a batch of ${total}: this model cannot be batched`,
        );
      }
      splitRows(t, rows).forEach((part, i) => (perCall[i]![name] = part));
    }
    return perCall;
  }
}
