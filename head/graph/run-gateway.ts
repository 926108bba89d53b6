import {
  GraphDocumentSchema,
  ModelDeploymentSchema,
  TroupeError,
  compileGraph,
  countSteps,
  checkStreamable,
  execute,
  leavesOf,
  planStreams,
  streamPlan,
  formatIssues,
  inferSignature,
  isDynamic,
} from '../../runtime/internal.js';
import type {
  ClientToHead,
  CompiledGraph,
  DeploymentView,
  GraphDeploymentView,
  GraphDocument,
  GraphView,
  LeafInfo,
  Logger,
  ModelDeployment,
  PlanNode,
  RunTrace,
  Signature,
  StreamStepCaller,
  WireTensorMap,
} from '../../runtime/internal.js';
import { runInferenceTimed } from '../calls/inference.js';
import type { Controller } from '../control/controller.js';
import type { ClusterState } from '../state/cluster-state.js';
import { boundDeploy } from '../control/deploy-bound.js';
import { ResultStore } from './results.js';
import { callMethodStep, isMethodKey, methodStepInfo, methodStepReplicas, methodStepStreams } from '../calls/method-steps.js';
import { openMethodStepStream } from '../calls/method-step-stream.js';
import type { ResultStoreOptions } from './results.js';

type RunMessage = Omit<Extract<ClientToHead, { type: 'run' }>, 'type'>;
type Composite = Exclude<PlanNode, { kind: 'model' | 'fn' | 'method' }>;

/** What a run answers: outputs, the per-step trace when it was asked for, and the version that ran it (a split deployment's). */
export interface RunAnswer {
  outputs: WireTensorMap;
  trace?: RunTrace;
  version?: string;
}

interface RegisteredGraph {
  plan: Composite;
  steps: number;
  signature: Signature;
  deployments: string[];
}

/** A run read as a stream: what `run` takes, less the trace. */
export type StreamRunRequest = Omit<RunMessage, 'id' | 'trace'>;

export interface GraphDeployOptions {
  /** Bound on the wait for READY (TROUPE_ERR_DEPLOY_TIMEOUT past it; the deploy goes on). */
  timeoutMs?: number;
  /** Runs once the graph is registered, waited or not. */
  onDeployed?: (view: GraphDeploymentView) => void;
  /** Sees the model and fn specs the graph defines before any is deployed; throws to refuse the graph. */
  check?: (specs: readonly ModelDeployment[]) => void;
}

/** Rejects with TROUPE_ERR_DEADLINE_EXCEEDED at `deadline`, whatever `work` is doing. */
function byDeadline<T>(work: Promise<T>, deadline: number | undefined, what: string): Promise<T> {
  if (deadline === undefined) return work;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', `${what}: no answer within the deadline`)),
      Math.max(0, deadline - Date.now()),
    );
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/**
 * The gateway of every run on the head, of a graph or of a single deployment, from SDK frames,
 * HTTP, jobs and front-door workers alike ({@link RunGateway.run}): it keeps the record of recent
 * run results that futures passed as inputs resolve from, so any run can be referenced. It also
 * holds the graphs it runs: deploying one (its models and fns through the controller, then the
 * graph, checked against the models' metadata) and removing it.
 */
export class RunGateway {
  readonly #state: ClusterState;
  readonly #controller: Controller;
  readonly #log: Logger;
  readonly #graphs = new Map<string, RegisteredGraph>();
  readonly #results: ResultStore;
  readonly #caller: StreamStepCaller;
  readonly #watchers = new Set<() => void>();

  constructor(state: ClusterState, controller: Controller, log: Logger, results: Partial<ResultStoreOptions> = {}) {
    this.#state = state;
    this.#controller = controller;
    this.#log = log;
    this.#results = new ResultStore(results);
    this.#caller = {
      call: async (deployment, inputs, deadline) => {
        if (isMethodKey(deployment)) return callMethodStep(state, deployment, inputs, deadline);
        const r = await runInferenceTimed(state, {
          deployment,
          inputs,
          ...(deadline !== undefined ? { timeoutMs: deadline - Date.now() } : {}),
        });
        return r.timing
          ? { outputs: r.outputs, queueMs: r.headQueueMs + r.timing.queueMs, computeMs: r.timing.computeMs }
          : { outputs: r.outputs };
      },
      leaf: (name) => this.#leaf(name),
      replicas: (name) =>
        isMethodKey(name)
          ? methodStepReplicas(state, name)
          : (state.deployments.get(name)?.actors.filter((a) => a.state === 'READY').length ?? 0),
      streams: (key) => isMethodKey(key) && methodStepStreams(state, key),
      open: (key, inputs, window, signal) => openMethodStepStream(state, key, inputs, window, signal),
    };
  }

  has(name: string): boolean {
    return this.#graphs.has(name);
  }

  /** Calls `listener` whenever a graph is registered or forgotten (front-door catalogs follow it); returns the unsubscribe. */
  watch(listener: () => void): () => void {
    this.#watchers.add(listener);
    return () => this.#watchers.delete(listener);
  }

  /** A registered graph's inputs and outputs as its nodes' signatures give them (null where a fn declares none). */
  signature(name: string): Signature | undefined {
    return this.#graphs.get(name)?.signature;
  }

  /** The registered graphs that call deployment `name`, by name (named sub-graphs included). */
  usersOf(name: string): string[] {
    return [...this.#graphs].filter(([, g]) => g.deployments.includes(name)).map(([graph]) => graph);
  }

  /** A registered graph's plan, for the status page to draw as boxes and arrows. */
  plan(name: string): PlanNode | undefined {
    return this.#graphs.get(name)?.plan;
  }

  /** Registered graphs, for `describe`. */
  views(): GraphView[] {
    return [...this.#graphs.entries()].map(([name, g]) => ({
      name,
      kind: g.plan.kind,
      steps: g.steps,
      inputs: g.signature.inputs,
      outputs: g.signature.outputs,
      deployments: g.deployments,
    }));
  }

  #leaf(name: string): LeafInfo {
    if (isMethodKey(name)) return methodStepInfo(this.#state, name);
    const d = this.#state.deployments.get(name);
    // A class actor is never a leaf of a compiled graph (compile.ts refuses it): its kind is never read as one.
    return { kind: d?.spec.kind === 'fn' ? 'fn' : 'model', metadata: d?.metadata ?? null };
  }

  #existing(name: string): 'model' | 'fn' | 'class' | 'graph' | undefined {
    if (this.#graphs.has(name)) return 'graph';
    const d = this.#state.deployments.get(name);
    return d ? (d.spec.kind ?? 'model') : undefined;
  }

  /**
   * Deploys a graph document: checks its structure, deploys (or updates) the models and fns it
   * defines and waits for them to be READY, checks the types where tensors connect, then makes
   * the graph and each named sub-graph runnable. A graph refused at the type check leaves its
   * models deployed: they are valid on their own, and a corrected graph reuses them.
   *
   * With `timeoutMs`, the returned promise rejects with TROUPE_ERR_DEPLOY_TIMEOUT once that passes,
   * naming every actor of its deployments not READY and why; the deploy itself goes on, and the
   * graph becomes runnable when its deployments are READY (then `onDeployed` runs, waited or not).
   */
  async deploy(raw: unknown, options: GraphDeployOptions = {}): Promise<GraphDeploymentView> {
    const parsed = GraphDocumentSchema.safeParse(raw);
    if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `invalid graph: ${formatIssues(parsed.error.issues)}`);
    const doc = parsed.data;
    const compiled = compileGraph(doc, (name) => this.#existing(name));
    const specs = compiled.deployments.map((node) => this.#deploymentSpec(node));
    options.check?.(specs);
    const done = this.#deployCompiled(doc, compiled, specs);
    if (options.onDeployed) done.then(options.onDeployed, () => {});
    if (options.timeoutMs === undefined) return done;
    return boundDeploy(done, options.timeoutMs, { kind: 'graph', name: doc.graph }, () =>
      specs.flatMap((spec) => {
        const d = this.#state.deployments.get(spec.name);
        return d ? [this.#state.deploymentView(d)] : [];
      }),
    );
  }

  async #deployCompiled(doc: GraphDocument, compiled: CompiledGraph, specs: ModelDeployment[]): Promise<GraphDeploymentView> {
    await Promise.all(
      specs.map((spec) =>
        this.#controller.deploy(spec).catch((err: unknown) => {
          const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
          throw new TroupeError(code, `${spec.kind ?? 'model'} '${spec.name}' of graph '${doc.graph}': ${(err as Error).message}`);
        }),
      ),
    );
    const leaf = (name: string) => this.#leaf(name);
    const registered = new Map<string, RegisteredGraph>();
    const streams = (key: string) => this.#caller.streams(key);
    for (const [name, plan] of compiled.composites) {
      checkStreamable(plan, streams);
      registered.set(name, {
        plan,
        steps: countSteps(plan),
        signature: inferSignature(plan, leaf),
        deployments: [...leavesOf(plan)],
      });
    }
    // Registered only once every composite passed its type check: a refused graph changes nothing.
    for (const [name, g] of registered) this.#graphs.set(name, g);
    this.#changed();
    this.#log.info({ graph: doc.graph, graphs: [...registered.keys()], steps: compiled.steps }, 'graph deployed');
    const root = compiled.root;
    const signature = root.kind === 'model' || root.kind === 'fn' ? this.#leafSignature(root.name) : registered.get(root.name)!.signature;
    const used = [...leavesOf(root)];
    return {
      name: doc.graph,
      kind: root.kind,
      steps: compiled.steps,
      inputs: signature.inputs,
      outputs: signature.outputs,
      graphs: [...registered.keys()],
      deployments: used.flatMap((n): DeploymentView[] => {
        const d = this.#state.deployments.get(n);
        return d ? [this.#state.deploymentView(d)] : [];
      }),
    };
  }

  #leafSignature(name: string): Signature {
    const info = this.#leaf(name);
    return isDynamic(info) ? { inputs: null, outputs: null } : { inputs: info.metadata!.inputs, outputs: info.metadata!.outputs };
  }

  #deploymentSpec(node: CompiledGraph['deployments'][number]) {
    const { kind, name, model, fn, ...options } = node as typeof node & { model?: unknown; fn?: unknown };
    const spec = ModelDeploymentSchema.safeParse({
      name,
      model: kind === 'fn' ? fn : model,
      ...(kind === 'fn' ? { kind: 'fn' } : {}),
      ...options,
    });
    if (!spec.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${kind} '${name}': ${formatIssues(spec.error.issues)}`);
    return spec.data;
  }

  /** Forgets a graph (its models and fns stay deployed). */
  undeploy(name: string): void {
    if (!this.#graphs.delete(name)) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no graph named '${name}'`);
    this.#changed();
  }

  #changed(): void {
    for (const listener of this.#watchers) listener();
  }

  /**
   * Runs a registered graph for an HTTP inference request. Not recorded as a run: no future can
   * name it, so the result store need not hold its outputs.
   */
  infer(request: Omit<RunMessage, 'id'>): Promise<WireTensorMap> {
    const deadline = request.timeoutMs !== undefined ? Date.now() + request.timeoutMs : undefined;
    return this.#run(request, deadline).then((a) => a.outputs);
  }

  /**
   * Runs a graph or a single deployment. The run is recorded at once, before anything is
   * awaited, so a run that arrives next and names this one as an input finds it.
   */
  run(message: RunMessage): Promise<RunAnswer> {
    const deadline = message.timeoutMs !== undefined ? Date.now() + message.timeoutMs : undefined;
    const work = this.#run(message, deadline);
    this.#results.record(
      message.id,
      work.then((a) => a.outputs),
    );
    return work;
  }

  /**
   * Whether a graph streams (a step is a generator method: runs of it are read with `stream`), asked
   * at each use: an actor says which of its methods are generators once an instance has started,
   * which may come after the graph was deployed; what cannot stream is then refused here.
   */
  #streaming(graph: RegisteredGraph): boolean {
    const streams = (key: string) => this.#caller.streams(key);
    if (!planStreams(graph.plan, streams)) return false;
    checkStreamable(graph.plan, streams);
    return true;
  }

  async #run(message: Omit<RunMessage, 'id'>, deadline: number | undefined): Promise<RunAnswer> {
    const trace: RunTrace | undefined = message.trace ? [] : undefined;
    // No await without futures: a plain run takes no extra turn of the event loop here.
    const inputs = message.refs ? await this.#inputs(message, deadline) : message.inputs;
    const graph = this.#graphs.get(message.deployment);
    if (graph && this.#streaming(graph))
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `graph '${message.deployment}' streams (a step is a generator method): read it with cluster.stream() or POST /v2/models/${message.deployment}/generate_stream`,
      );
    if (!graph) {
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0)
        throw new TroupeError(
          'TROUPE_ERR_DEADLINE_EXCEEDED',
          `deployment '${message.deployment}': the deadline passed while inputs were resolved`,
        );
      const started = performance.now();
      const r = await runInferenceTimed(this.#state, {
        deployment: message.deployment,
        inputs,
        ...(message.outputs ? { outputs: message.outputs } : {}),
        ...(left !== undefined ? { timeoutMs: left } : {}),
        ...(message.model !== undefined ? { model: message.model } : {}),
      });
      const outputs = r.outputs;
      if (trace) {
        const wall = performance.now() - started;
        const entry: RunTrace[number] = { step: message.deployment, kind: this.#leaf(message.deployment).kind, startMs: 0, wallMs: wall };
        if (r.timing)
          Object.assign(entry, {
            queueMs: r.headQueueMs + r.timing.queueMs,
            computeMs: r.timing.computeMs,
            transferMs: Math.max(0, wall - r.headQueueMs - r.timing.queueMs - r.timing.computeMs),
          });
        trace.push(entry);
      }
      return { outputs, ...(trace ? { trace } : {}), ...(r.version !== undefined ? { version: r.version } : {}) };
    }
    const all = await byDeadline(
      execute(graph.plan, inputs, this.#caller, { ...(deadline !== undefined ? { deadline } : {}), ...(trace ? { trace } : {}) }),
      deadline,
      `graph '${message.deployment}'`,
    );
    const outputs = message.outputs ? this.#pick(all, message.outputs, message.deployment) : all;
    return trace ? { outputs, trace } : { outputs };
  }

  /** Whether `name` is a registered graph that streams (runs of it are read with {@link stream}). */
  streams(name: string): boolean {
    const graph = this.#graphs.get(name);
    return graph !== undefined && this.#streaming(graph);
  }

  /**
   * Runs a graph or a single deployment as a stream of answers: a streaming graph yields the
   * last step's outputs item by item (runtime/graph/stream-executor.ts), anything else its one
   * answer. Pulled: nothing runs ahead of the reader past each step's window. `signal` cancels
   * every step's stream; so does returning the iterator.
   */
  async *stream(request: StreamRunRequest, signal: AbortSignal): AsyncGenerator<WireTensorMap> {
    const deadline = request.timeoutMs !== undefined ? Date.now() + request.timeoutMs : undefined;
    const graph = this.#graphs.get(request.deployment);
    const pick = (all: WireTensorMap) => (request.outputs ? this.#pick(all, request.outputs, request.deployment) : all);
    if (!graph || !this.#streaming(graph)) {
      yield (await this.#run(request, deadline)).outputs;
      return;
    }
    const inputs = request.refs ? await this.#inputs(request, deadline) : request.inputs;
    for await (const out of streamPlan(graph.plan, inputs, this.#caller, { signal, ...(deadline !== undefined ? { deadline } : {}) }))
      yield pick(out);
  }

  /** The run's tensors plus the outputs of the runs its futures name, resolved here. */
  async #inputs(message: Omit<RunMessage, 'id'>, deadline: number | undefined): Promise<WireTensorMap> {
    const refs = Object.entries(message.refs ?? {});
    if (refs.length === 0) return message.inputs;
    for (const [name] of refs) {
      if (name in message.inputs)
        throw new TroupeError('TROUPE_ERR_BAD_INPUT', `input '${name}' is given twice: as a tensor and as a future`);
    }
    const resolved = await byDeadline(
      Promise.all(refs.map(async ([name, ref]) => [name, await this.#results.resolve(name, ref)] as const)),
      deadline,
      `run '${message.deployment}' waiting for the futures it was given`,
    );
    return { ...message.inputs, ...Object.fromEntries(resolved) };
  }

  #pick(outputs: WireTensorMap, names: readonly string[], graph: string): WireTensorMap {
    const out: WireTensorMap = {};
    for (const name of names) {
      const t = outputs[name];
      if (!t)
        throw new TroupeError(
          'TROUPE_ERR_BAD_INPUT',
          `unknown output '${name}': graph '${graph}' gives ${Object.keys(outputs)
            .map((n) => `'${n}'`)
            .join(', ')}`,
        );
      out[name] = t;
    }
    return out;
  }
}
