import { TroupeError } from '../errors.js';
import type { WireTensorMap } from '../tensor/wire.js';
import { leafKey } from './compile.js';
import type { PlanNode, PlanPipeline } from './compile.js';
import { execute } from './executor.js';
import type { StepCaller } from './executor.js';
import { orderedAhead } from './ordered-ahead.js';
import { selectInputs } from './select-inputs.js';

/**
 * Streams through a pipeline (docs/actors.md, "Streams through a pipeline"): a step that is a
 * generator method streams its items, and each item goes on to the next step as it comes. The
 * next step runs once per item (a model infers it, a method is called with it, a generator method
 * streams again and its items are flattened in order), so the run yields the last step's outputs,
 * item by item, in order.
 *
 * Everything is pulled: a step's stream is read only while the run's reader reads, and each
 * step's stream is opened with a bounded window, so a slow reader holds the first producer at
 * most a window ahead on each streaming step. Returning the iterator (or aborting `signal`)
 * cancels every open step stream, which ends their generators.
 */

/** Items a streaming step may run ahead of the step after it, and items in flight at once through the steps after it. */
export const STEP_STREAM_WINDOW = 8;

/** What the streaming executor needs beyond {@link StepCaller}. */
export interface StreamStepCaller extends StepCaller {
  /** Whether the leaf `key` (see leafKey) streams: a generator method. */
  streams(key: string): boolean;
  /** Opens the stream of one streaming step on `inputs`: its items, pulled; `return()` or `signal` cancels it. */
  open(key: string, inputs: WireTensorMap, window: number, signal: AbortSignal): AsyncIterableIterator<WireTensorMap>;
}

/** Whether anything in `plan` streams. */
export function planStreams(plan: PlanNode, streams: (key: string) => boolean): boolean {
  switch (plan.kind) {
    case 'model':
    case 'fn':
    case 'method':
      return streams(leafKey(plan));
    case 'pipeline':
      return plan.steps.some((s) => planStreams(s, streams));
    case 'ensemble':
      return plan.members.some((m) => planStreams(m, streams)) || (plan.combine.op === 'fn' && planStreams(plan.combine.fn, streams));
    case 'dataParallel':
      return planStreams(plan.step, streams);
  }
}

/**
 * Refuses (TROUPE_ERR_BAD_SPEC) a streaming step where items cannot flow on one by one: inside an
 * ensemble (its members' answers are combined once, so each must be one answer) or a
 * data-parallel (its chunks' answers are joined row-wise). Streams pass through pipelines only.
 */
export function checkStreamable(plan: PlanNode, streams: (key: string) => boolean): void {
  const refuse = (where: string, inner: PlanNode): never => {
    throw new TroupeError(
      'TROUPE_ERR_BAD_SPEC',
      `${where} contains '${inner.name}', which streams (a generator method); streams pass through pipelines only, not ensembles or data-parallel steps`,
    );
  };
  const streamingLeaf = (p: PlanNode): PlanNode | undefined => {
    if (p.kind === 'model' || p.kind === 'fn' || p.kind === 'method') return streams(leafKey(p)) ? p : undefined;
    if (p.kind === 'pipeline') return p.steps.map(streamingLeaf).find((x) => x !== undefined);
    if (p.kind === 'ensemble')
      return [...p.members, ...(p.combine.op === 'fn' ? [p.combine.fn] : [])].map(streamingLeaf).find((x) => x !== undefined);
    if (p.kind === 'dataParallel') return streamingLeaf(p.step);
    return undefined;
  };
  // Actors whose streaming method an earlier step of the pipeline being walked calls.
  const walk = (p: PlanNode, streaming: Set<string>): void => {
    if (p.kind === 'pipeline') p.steps.forEach((step) => walk(step, streaming));
    else if (p.kind === 'ensemble' || p.kind === 'dataParallel') {
      const inner = streamingLeaf(p);
      if (inner) refuse(`${p.kind} '${p.name}'`, inner);
    } else if (p.kind === 'method') {
      // A stream holds its instance until it ends, so a later step on the same actor would wait
      // for the stream it feeds: a deadlock once the stream is longer than its window.
      if (streaming.has(p.actor))
        throw new TroupeError(
          'TROUPE_ERR_BAD_SPEC',
          `method step '${p.name}' calls actor '${p.actor}', whose streaming method an earlier step reads: a stream holds its instance until it ends, so this step would wait for it forever; call another class actor`,
        );
      if (streams(leafKey(p))) streaming.add(p.actor);
    }
  };
  walk(plan, new Set());
}

export interface StreamOptions {
  /** Cancels every step's stream (a reader that went away). */
  signal: AbortSignal;
  /** Absolute time (Date.now()) after which no non-streaming step starts; streams themselves are paced by their reader. */
  deadline?: number;
}

/** The one item of steps that do not stream. */
async function only(items: AsyncGenerator<WireTensorMap>): Promise<WireTensorMap> {
  const first = await items.next();
  await items.return(undefined);
  if (first.done) throw new TroupeError('TROUPE_ERR_INTERNAL', 'steps that do not stream gave no answer');
  return first.value;
}

/** `err` from the step at `path`; one that execute() ran names its path from `ran` on, which becomes the full path. */
function atStep(path: string, err: unknown, ran?: string): TroupeError {
  const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
  const message = (err as Error)?.message ?? String(err);
  const named = ran !== undefined && message.startsWith(`step '${ran}`);
  return new TroupeError(code, named ? `step '${path}${message.slice(`step '${ran}`.length)}` : `step '${path}': ${message}`, {
    cause: err,
  });
}

class StreamRun {
  readonly #caller: StreamStepCaller;
  readonly #options: StreamOptions;

  constructor(caller: StreamStepCaller, options: StreamOptions) {
    this.#caller = caller;
    this.#options = options;
  }

  /** The items of one node on `inputs`: one for a node that does not stream. */
  async *node(plan: PlanNode, inputs: WireTensorMap, path: string): AsyncGenerator<WireTensorMap> {
    if (this.#options.signal.aborted) return;
    const streams = (key: string) => this.#caller.streams(key);
    if (!planStreams(plan, streams)) {
      let out: WireTensorMap;
      const deadline = this.#options.deadline;
      try {
        if (plan.kind === 'model' || plan.kind === 'fn' || plan.kind === 'method') {
          if (deadline !== undefined && Date.now() >= deadline)
            throw new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', 'not started: the run passed its deadline');
          out = (await this.#caller.call(leafKey(plan), inputs, deadline)).outputs;
        } else out = await execute(plan, inputs, this.#caller, deadline !== undefined ? { deadline } : {});
      } catch (err) {
        throw atStep(path, err, plan.name);
      }
      yield out;
      return;
    }
    if (plan.kind === 'pipeline') {
      yield* this.#steps(plan, 0, new Map(Object.entries(inputs)), Object.keys(inputs), path);
      return;
    }
    // A streaming leaf (checkStreamable keeps streams out of ensembles and data-parallel steps).
    if (plan.kind !== 'model' && plan.kind !== 'fn' && plan.kind !== 'method')
      throw atStep(path, new TroupeError('TROUPE_ERR_BAD_SPEC', `a ${plan.kind} cannot stream`));
    let items: AsyncIterableIterator<WireTensorMap>;
    try {
      // Opening refuses what the step would not take (its inputs against its signature) at once.
      items = this.#caller.open(leafKey(plan), inputs, STEP_STREAM_WINDOW, this.#options.signal);
    } catch (err) {
      throw atStep(path, err);
    }
    try {
      for (;;) {
        let next: IteratorResult<WireTensorMap>;
        try {
          next = await items.next();
        } catch (err) {
          throw atStep(path, err);
        }
        if (next.done) return;
        yield next.value;
      }
    } finally {
      // Reached on a cancel too (the reader returned): the step's generator is stopped.
      await items.return?.();
    }
  }

  /** Steps `k..` of a pipeline, given what the steps before made available (`values`) and what the last one gave (`previous`). */
  async *#steps(
    p: PlanPipeline,
    k: number,
    values: Map<string, WireTensorMap[string]>,
    previous: string[],
    path: string,
  ): AsyncGenerator<WireTensorMap> {
    const step = p.steps[k]!;
    const stepPath = `${path} > ${step.name}`;
    const stepInputs = this.#select(step, values, previous, p.map, stepPath);
    // The pipeline's inputs are what its first step takes, as the deploy-time check assumed.
    const base = k === 0 ? new Map(Object.entries(stepInputs)) : values;
    const rest = (out: WireTensorMap) => {
      const next = new Map(base);
      for (const [name, t] of Object.entries(out)) next.set(name, t);
      return this.#steps(p, k + 1, next, Object.keys(out), path);
    };
    const streams = (key: string) => this.#caller.streams(key);
    if (k < p.steps.length - 1 && planStreams(step, streams) && !p.steps.slice(k + 1).some((s) => planStreams(s, streams))) {
      // Items leave a stream for steps that answer once each: several items go through them at once, in order.
      yield* orderedAhead(this.node(step, stepInputs, stepPath), (out) => only(rest(out)), STEP_STREAM_WINDOW);
      return;
    }
    for await (const out of this.node(step, stepInputs, stepPath)) {
      if (k === p.steps.length - 1) {
        yield out;
        continue;
      }
      yield* rest(out);
    }
  }

  /** The inputs a step takes from what is available (select-inputs.ts), as the executor selects them. */
  #select(
    plan: PlanNode,
    values: ReadonlyMap<string, WireTensorMap[string]>,
    previous: readonly string[],
    map: PlanPipeline['map'],
    path: string,
  ): WireTensorMap {
    try {
      return selectInputs(plan, values, previous, map, (n) => this.#caller.leaf(n));
    } catch (err) {
      throw atStep(path, err);
    }
  }
}

/**
 * Runs a graph plan as a stream: yields the final outputs of each item, in order. A plan with no
 * streaming step yields once (its one answer). A failure rejects the pending `next()` with the
 * failing step's code and path, after the items already yielded.
 */
export function streamPlan(
  plan: PlanNode,
  inputs: WireTensorMap,
  caller: StreamStepCaller,
  options: StreamOptions,
): AsyncGenerator<WireTensorMap> {
  return new StreamRun(caller, options).node(plan, inputs, plan.name);
}
