import { performance } from 'node:perf_hooks';
import { TroupeError } from '../errors.js';
import { fromWire, toWire } from '../tensor/wire.js';
import type { WireTensor, WireTensorMap } from '../tensor/wire.js';
import { batchSize, chunkBounds, concatRows, sliceRows } from '../tensor/rows.js';
import { combineOutputs } from './combiners.js';
import { leafKey } from './compile.js';
import type { PlanDataParallel, PlanEnsemble, PlanNode, PlanPipeline } from './compile.js';
import { selectInputs } from './select-inputs.js';
import type { LeafInfo } from './signature.js';
import type { RunTrace, StepTiming } from './trace.js';

/**
 * What the executor needs from where it runs: calls to steps, and what it knows of them. On the
 * head a call goes to a deployment's replicas; in a graph served by one actor, to a session there.
 */
export interface StepCaller {
  /** One call to a model or fn deployment (or `actor#method`, see leafKey), validated and routed like any run (runInference). */
  call(deployment: string, inputs: WireTensorMap, deadline: number | undefined): Promise<LeafResult>;
  /** Kind and metadata of a deployment, for its input names. */
  leaf(name: string): LeafInfo;
  /** READY replicas of a deployment, to size a data-parallel window. */
  replicas(name: string): number;
}

export interface ExecuteOptions {
  /** Absolute time (Date.now()) after which no step starts and the run fails. */
  deadline?: number;
  /** When given, one entry per step is pushed onto it. */
  trace?: RunTrace;
}

/** A leaf call's outputs, and where its time went when the caller could tell. */
export interface LeafResult {
  outputs: WireTensorMap;
  /** Waiting for a replica plus waiting in the actor for its turn (0 for a session in the same process). */
  queueMs?: number;
  /** Inside the model or fn. */
  computeMs?: number;
}

/** Errors already prefixed with the step they came from, so outer steps do not prefix them again. */
const located = new WeakSet<TroupeError>();

function atStep(path: string, err: unknown): TroupeError {
  if (err instanceof TroupeError && located.has(err)) return err;
  const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
  const out = new TroupeError(code, `step '${path}': ${(err as Error)?.message ?? String(err)}`, { cause: err });
  located.add(out);
  return out;
}

/**
 * One run of a graph. Steps are promises: a pipeline awaits each step in turn, an ensemble's
 * members and a data-parallel's chunks run at once. The first failure marks the run failed, so
 * steps not yet started (later pipeline steps, queued chunks) never start; the same goes for the
 * deadline. Work already sent to an actor finishes there and its answer is dropped.
 */
class Run {
  readonly #caller: StepCaller;
  readonly #deadline: number | undefined;
  readonly #trace: RunTrace | undefined;
  readonly #t0 = performance.now();
  #failed: TroupeError | undefined;

  constructor(caller: StepCaller, options: ExecuteOptions) {
    this.#caller = caller;
    this.#deadline = options.deadline;
    this.#trace = options.trace;
  }

  async node(plan: PlanNode, inputs: WireTensorMap, path: string, rows?: number): Promise<WireTensorMap> {
    this.#mayStart(path);
    const start = performance.now();
    try {
      let out: WireTensorMap;
      let leaf: LeafResult | undefined;
      switch (plan.kind) {
        case 'model':
        case 'fn':
        case 'method':
          leaf = await this.#caller.call(leafKey(plan), inputs, this.#deadline);
          out = leaf.outputs;
          break;
        case 'pipeline':
          out = await this.#pipeline(plan, inputs, path);
          break;
        case 'ensemble':
          out = await this.#ensemble(plan, inputs, path);
          break;
        case 'dataParallel':
          out = await this.#dataParallel(plan, inputs, path);
          break;
      }
      this.#record({ step: path, kind: plan.kind, start, ...(rows !== undefined ? { rows } : {}) }, leaf);
      return out;
    } catch (err) {
      const located = atStep(path, err);
      this.#failed ??= located;
      throw located;
    }
  }

  /** Refuses to start a step once the run has failed or its deadline has passed. */
  #mayStart(path: string): void {
    if (this.#failed)
      throw atStep(path, new TroupeError(this.#failed.code, `not started: the run already failed (${this.#failed.message})`));
    if (this.#deadline !== undefined && Date.now() >= this.#deadline) {
      throw atStep(path, new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', 'not started: the run passed its deadline'));
    }
  }

  #record(t: { step: string; kind: StepTiming['kind']; start: number; rows?: number }, leaf?: LeafResult): void {
    if (!this.#trace) return;
    const wall = performance.now() - t.start;
    const entry: StepTiming = { step: t.step, kind: t.kind, startMs: round(t.start - this.#t0), wallMs: round(wall) };
    if (leaf?.queueMs !== undefined && leaf.computeMs !== undefined) {
      entry.queueMs = round(leaf.queueMs);
      entry.computeMs = round(leaf.computeMs);
      // What neither queue nor compute explains: encoding, the network and decoding, both ways.
      entry.transferMs = round(Math.max(0, wall - leaf.queueMs - leaf.computeMs));
    }
    if (t.rows !== undefined) entry.rows = t.rows;
    this.#trace.push(entry);
  }

  /** The inputs a step takes from what is available (select-inputs.ts), a failure located at the step. */
  #select(
    plan: PlanNode,
    values: ReadonlyMap<string, WireTensor>,
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

  async #pipeline(p: PlanPipeline, inputs: WireTensorMap, path: string): Promise<WireTensorMap> {
    let values = new Map(Object.entries(inputs));
    let previous = Object.keys(inputs);
    let out: WireTensorMap = inputs;
    for (const [k, step] of p.steps.entries()) {
      const stepPath = `${path} > ${step.name}`;
      const stepInputs = this.#select(step, values, previous, p.map, stepPath);
      // The pipeline's inputs are what its first step takes, as the deploy-time check assumed.
      if (k === 0) values = new Map(Object.entries(stepInputs));
      out = await this.node(step, stepInputs, stepPath);
      for (const [name, t] of Object.entries(out)) values.set(name, t);
      previous = Object.keys(out);
    }
    return out;
  }

  async #ensemble(e: PlanEnsemble, inputs: WireTensorMap, path: string): Promise<WireTensorMap> {
    const values = new Map(Object.entries(inputs));
    const names = Object.keys(inputs);
    const results = await Promise.all(
      e.members.map((m) => {
        const memberPath = `${path} > ${m.name}`;
        // Selected inside the promise chain, so a wiring error fails this member like any other.
        return Promise.resolve().then(() => this.node(m, this.#select(m, values, names, [], memberPath), memberPath));
      }),
    );
    const combinePath = `${path} > combine`;
    if (e.combine.op === 'fn') {
      const all: WireTensorMap = {};
      results.forEach((r, i) => {
        for (const [name, t] of Object.entries(r)) all[`${e.members[i]!.name}/${name}`] = t;
      });
      return this.node(e.combine.fn, all, `${path} > ${e.combine.fn.name}`);
    }
    this.#mayStart(combinePath);
    const start = performance.now();
    try {
      const members = results.map((r, i) => {
        const outputs: Record<string, ReturnType<typeof fromWire>> = {};
        for (const [name, t] of Object.entries(r)) outputs[name] = fromWire(t, `output '${name}' of member '${e.members[i]!.name}'`);
        return { name: e.members[i]!.name, outputs };
      });
      const combined = combineOutputs(e.combine, members);
      const out: WireTensorMap = {};
      for (const [name, t] of Object.entries(combined)) out[name] = toWire(t);
      this.#record({ step: combinePath, kind: 'combine', start });
      return out;
    } catch (err) {
      throw atStep(combinePath, err);
    }
  }

  async #dataParallel(d: PlanDataParallel, inputs: WireTensorMap, path: string): Promise<WireTensorMap> {
    const chunkPath = (i: number) => `${path} > ${d.step.name}[${i}]`;
    const rows = batchSize(inputs, `dataParallel '${d.name}'`);
    const bounds = chunkBounds(rows, d.chunk);
    if (bounds.length === 0)
      return this.node(
        d.step,
        this.#select(d.step, new Map(Object.entries(inputs)), Object.keys(inputs), [], chunkPath(0)),
        chunkPath(0),
        0,
      );
    const replicas =
      d.step.kind === 'model' || d.step.kind === 'fn' || d.step.kind === 'method' ? this.#caller.replicas(leafKey(d.step)) : 0;
    // Two chunks per replica keep every replica busy while the next chunk travels to it.
    const window = Math.min(bounds.length, d.parallel ?? (replicas > 0 ? 2 * replicas : 8));
    const results: WireTensorMap[] = new Array(bounds.length);
    let next = 0;
    const worker = async () => {
      while (next < bounds.length) {
        const i = next++;
        const [start, end] = bounds[i]!;
        const chunk: WireTensorMap = {};
        for (const [name, t] of Object.entries(inputs)) chunk[name] = sliceRows(t, start, end, `input '${name}'`);
        const names = Object.keys(chunk);
        results[i] = await this.node(
          d.step,
          this.#select(d.step, new Map(Object.entries(chunk)), names, [], chunkPath(i)),
          chunkPath(i),
          end - start,
        );
      }
    };
    await Promise.all(Array.from({ length: window }, worker));
    const out: WireTensorMap = {};
    for (const name of Object.keys(results[0]!)) {
      out[name] = concatRows(
        results.map((r, i) => {
          const t = r[name];
          if (!t) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `chunk ${i} gave no output '${name}' (chunk 0 did)`);
          return t;
        }),
        `dataParallel '${d.name}' output '${name}'`,
      );
    }
    return out;
  }
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * Runs a graph plan on inputs; rejects with the failing step's code and a message that starts
 * with its path, e.g. `step 'ocr > det': deployment 'det' has no READY replica`.
 */
export function execute(plan: PlanNode, inputs: WireTensorMap, caller: StepCaller, options: ExecuteOptions = {}): Promise<WireTensorMap> {
  return new Run(caller, options).node(plan, inputs, plan.name);
}
