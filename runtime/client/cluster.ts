import { DEFAULT_DEPLOY_TIMEOUT_S, MAX_DEPLOY_TIMEOUT_S } from '../deploy-timeout.js';
import { TroupeError } from '../errors.js';
import { newId } from '../ids.js';
import type { ClientToHead } from '../protocol/client.js';
import type { ModelDeploymentInput } from '../spec.js';
import type { Tensor } from '../tensor/tensor.js';
import { mapFromWire, mapToWire } from '../tensor/wire.js';
import type { ClusterView, DeploymentView } from '../views.js';
import { isGraphStep } from '../graph/builder.js';
import type { GraphStep } from '../graph/builder.js';
import type { GraphDocument } from '../graph/schema.js';
import type { RunTrace } from '../graph/trace.js';
import type { GraphDeploymentView } from '../graph/view.js';
import type { RunRef } from '../protocol/client.js';
import { pickReferenced, referenceFailed } from '../graph/refs.js';
import { withRetries } from './connection.js';
import type { HeadConnection } from './connection.js';
import type { DirectRouter } from './router.js';
import { ActorStates } from './actor-states.js';
import { asTensor } from './run-input.js';
import { Future, FutureOutput } from './future.js';
import { ActorHandle, CallFuture, actorDeployment } from './actor-handle.js';
import { StreamRegistry } from './actor-stream.js';
import type { ActorStream } from './actor-stream.js';
import { openRunStream } from './run-stream.js';
import { splitModelName } from '../oip/infer-backend.js';
import type { StreamRunOptions } from './run-stream.js';
import type { ActorSpec, ActorTransport } from './actor-handle.js';
import type { Outputs } from './future.js';
import type { DeployOptions, RunInputs, RunOptions, SharedMemoryStats, UndeployOptions } from './cluster-options.js';
export type { ConnectOptions, DeployOptions, RunInputs, RunOptions, SharedMemoryStats, UndeployOptions } from './cluster-options.js';

interface RunAnswer {
  outputs: Outputs;
  trace: RunTrace | undefined;
  /** The version that ran it, when the deployment is split between versions or runs one of them. */
  version?: string | undefined;
}

/** How long past a run's deadline the SDK waits for the head's own deadline error. */
const DEADLINE_GRACE_MS = 2000;

/**
 * How long past a deploy's bound the SDK waits for the head's answer: the head's
 * TROUPE_ERR_DEPLOY_TIMEOUT names what is missing, a local timer could only say nothing came.
 */
const DEPLOY_GRACE_MS = 10_000;

/**
 * A connection to a Troupe head: deploy models, run them, look at the cluster.
 *
 * @example
 * const cluster = await connect('ws://127.0.0.1:8470');
 * await cluster.deploy({ name: 'mlp', model: 'mlp.onnx' });
 * const { logits } = await cluster.run('mlp', { x: tensor('float32', [1, 64], new Float32Array(64)) });
 * await cluster.close();
 */
export class Cluster {
  readonly #conn: HeadConnection;
  readonly #retries: number;
  readonly #router: DirectRouter | undefined;
  readonly #streams: StreamRegistry;
  /** What each actor's instances last answered this client from: an instance that lost it since says so. */
  readonly #actorStates = new ActorStates();

  /** @internal use {@link connect} */
  constructor(conn: HeadConnection, retries = 0, router?: DirectRouter, streams = new StreamRegistry()) {
    this.#conn = conn;
    this.#retries = retries;
    this.#router = router;
    this.#streams = streams;
  }

  /** Whether the connection to the head is up now (it reconnects by itself after a drop). */
  get connected(): boolean {
    return this.#conn.connected;
  }

  /**
   * Deploys (or updates) one model and resolves once all its replicas are READY; or deploys a
   * graph (built with `pipeline`, `ensemble`, ... or its JSON form): its models and fns, then the
   * graph itself, checked against their metadata, and runnable by name. Never waits past
   * `timeoutMs` (default 60 s): then it rejects with TROUPE_ERR_DEPLOY_TIMEOUT saying why.
   *
   * @example
   * try { await cluster.deploy({ name: 'mlp', model: 'mlp.onnx', replicas: 2 }, { timeoutMs: 30_000 }); }
   * catch (err) { if (err instanceof TroupeError && err.code === 'TROUPE_ERR_DEPLOY_TIMEOUT') console.log(err.message); }
   */
  async deploy(spec: ModelDeploymentInput, options?: DeployOptions): Promise<DeploymentView>;
  async deploy(graph: GraphStep | GraphDocument, options?: DeployOptions): Promise<GraphDeploymentView>;
  async deploy(
    spec: ModelDeploymentInput | GraphStep | GraphDocument,
    options: DeployOptions = {},
  ): Promise<DeploymentView | GraphDeploymentView> {
    const wire = isGraphStep(spec) ? spec.toJSON() : spec;
    const timeoutMs = options.timeoutMs ?? DEFAULT_DEPLOY_TIMEOUT_S * 1000;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_DEPLOY_TIMEOUT_S * 1000) {
      throw new TroupeError('TROUPE_ERR_BAD_FLAG', `deploy: timeoutMs must be in (0, ${MAX_DEPLOY_TIMEOUT_S * 1000}], got ${timeoutMs}`);
    }
    const deadline = Date.now() + timeoutMs;
    // Deploying is declarative (saying it twice changes nothing), so a retry is safe; it waits
    // only for what is left of the bound (and a timed-out deploy has none left, so is not retried).
    return withRetries(this.#conn, { retries: this.#retries, deadline }, () => {
      const left = Math.max(1, deadline - Date.now());
      return this.#conn.request(
        {
          type: 'deploy',
          spec: wire,
          timeoutMs: left,
          ...(options.wait === false ? { wait: false } : {}),
          ...(options.replace ? { replace: true } : {}),
        },
        left + DEPLOY_GRACE_MS,
      );
    });
  }

  /**
   * Deploys with `replace: true`: changes a deployment (or a graph and its models) that may be
   * READY, e.g. to another replica count or model file.
   *
   * @example
   * await cluster.update({ name: 'mlp', model: 'mlp.onnx', replicas: 2, cpus: 0.25 });
   */
  async update(spec: ModelDeploymentInput, options?: Omit<DeployOptions, 'replace'>): Promise<DeploymentView>;
  async update(graph: GraphStep | GraphDocument, options?: Omit<DeployOptions, 'replace'>): Promise<GraphDeploymentView>;
  async update(
    spec: ModelDeploymentInput | GraphStep | GraphDocument,
    options: Omit<DeployOptions, 'replace'> = {},
  ): Promise<DeploymentView | GraphDeploymentView> {
    return this.deploy(spec as ModelDeploymentInput, { ...options, replace: true });
  }

  /**
   * Promotes `version` of a deployment split between versions (docs/rollouts.md): every call goes
   * to it, the other versions stop once their queued calls are served, and the split as it was is
   * kept for {@link rollback}. Resolves once READY (rejects with TROUPE_ERR_DEPLOY_TIMEOUT past
   * `timeoutMs`, default 60 s).
   *
   * @example
   * await cluster.promote('ranker', 'v2');
   */
  async promote(name: string, version: string, options: Pick<DeployOptions, 'timeoutMs'> = {}): Promise<DeploymentView> {
    return this.#rollout(name, 'promote', version, options.timeoutMs);
  }

  /**
   * Rolls a rollout back: after a promotion, the split as it was before it; otherwise the first
   * version listed takes every call. A deployment with one version and no promotion to undo is
   * refused (TROUPE_ERR_BAD_REQUEST, saying so). Resolves once READY.
   *
   * @example
   * await cluster.rollback('ranker');
   */
  async rollback(name: string, options: Pick<DeployOptions, 'timeoutMs'> = {}): Promise<DeploymentView> {
    return this.#rollout(name, 'rollback', undefined, options.timeoutMs);
  }

  #rollout(name: string, action: 'promote' | 'rollback', version: string | undefined, timeoutMs = DEFAULT_DEPLOY_TIMEOUT_S * 1000) {
    const deadline = Date.now() + timeoutMs;
    // Promoting twice changes nothing more, so a promote is retried; a rollback is not (a second
    // one after a promotion's rollback would end the restored split).
    const retries = action === 'promote' ? this.#retries : 0;
    return withRetries(this.#conn, { retries, deadline }, () => {
      const left = Math.max(1, deadline - Date.now());
      return this.#conn.request(
        { type: 'rollout', name, action, ...(version !== undefined ? { version } : {}), timeoutMs: left },
        left + DEPLOY_GRACE_MS,
      );
    });
  }

  /**
   * Removes a graph (its models and fns stay deployed), or drains and removes a deployment. A
   * deployment that graphs call is refused with TROUPE_ERR_DEPLOYMENT_IN_USE unless `force`.
   */
  async undeploy(name: string, options: UndeployOptions = {}): Promise<void> {
    await this.#conn.request({ type: 'undeploy', name, ...(options.force ? { force: true } : {}) }, 60_000);
    // This client removed it: an actor deployed under the name later is no loss of state to it.
    this.#actorStates.forget(name);
  }

  /**
   * Runs a deployment or a graph on named inputs; returns a future of its named outputs at once.
   * An input may be another run's Future (or `future.output(name)`): the request goes out now and
   * the head feeds that run's result in when it is ready, without a round trip through here.
   * (A run this client sent to a replica directly is resolved here instead: the head never held it.)
   * A model of a multiplexed deployment is named `deployment:model`, as over HTTP and gRPC (or
   * with `options.model`).
   *
   * @example
   * const { logits } = await cluster.run('tenants:t05', { x });
   */
  run(name: string, inputs: RunInputs, options: RunOptions = {}): Future<Outputs> {
    const split = splitModelName(name);
    if (split.model !== undefined) {
      if (options.model !== undefined && options.model !== split.model)
        throw new TroupeError(
          'TROUPE_ERR_BAD_REQUEST',
          `run('${name.slice(0, 100)}') names model '${split.model}' and options.model '${options.model.slice(0, 100)}': name one`,
        );
      options = { ...options, model: split.model };
    }
    const deployment = split.deployment;
    const id = newId();
    const tensors: Record<string, Tensor> = {};
    const refs: Record<string, RunRef> = {};
    const local: [string, RunRef, Future][] = [];
    const called: [string, CallFuture][] = [];
    for (const [name, value] of Object.entries(inputs)) {
      // An actor call's value is held by the head's call record, not its runs: fetched here.
      if (value instanceof CallFuture) {
        called.push([name, value]);
        continue;
      }
      const ref =
        value instanceof Future ? { run: value.id } : value instanceof FutureOutput ? { run: value.run, output: value.output } : undefined;
      const source = value instanceof Future ? value : value instanceof FutureOutput ? value.source : undefined;
      if (!ref) tensors[name] = asTensor(name, value);
      else if (source?.resolvedHere) local.push([name, ref, source]);
      else refs[name] = ref;
    }
    if (local.length === 0 && called.length === 0) {
      const { answer, resolvedHere } = this.#send(id, deployment, tensors, refs, options);
      return new Future(
        id,
        answer.then((a) => a.outputs),
        answer.then((a) => a.trace),
        resolvedHere,
        answer.then((a) => a.version),
      );
    }
    // Futures of runs sent to replicas directly, and of actor calls, are awaited here and their tensors sent along.
    const answer = Promise.all([
      ...local.map(async ([name, ref, source]) => {
        let outputs: Outputs;
        try {
          outputs = await source;
        } catch (err) {
          throw referenceFailed(name, ref, err);
        }
        return [name, pickReferenced(name, ref, outputs)] as const;
      }),
      ...called.map(async ([name, future]) => [name, asTensor(name, await future)] as const),
    ]).then((resolved) => this.#send(id, deployment, { ...tensors, ...Object.fromEntries(resolved) }, refs, options).answer);
    return new Future(
      id,
      answer.then((a) => a.outputs),
      answer.then((a) => a.trace),
      true,
      answer.then((a) => a.version),
    );
  }

  /** Sends one run, directly to a replica when its deployment has routes, else through the head. */
  #send(
    id: string,
    deployment: string,
    tensors: Record<string, Tensor>,
    refs: Record<string, RunRef>,
    options: RunOptions,
  ): { answer: Promise<RunAnswer>; resolvedHere: boolean } {
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    const policy = { retries: options.retries ?? this.#retries, deadline };
    const direct =
      Object.keys(refs).length === 0 && !options.trace && options.model === undefined && this.#router?.queueFor(deployment) !== undefined;
    if (direct) {
      const inputs = mapToWire(tensors);
      const attempt = () => {
        const queue = this.#router?.queueFor(deployment);
        const sent = queue?.submit(inputs, {
          ...(options.outputs ? { outputs: options.outputs } : {}),
          ...(deadline !== undefined ? { deadline } : {}),
        });
        // No replica takes direct calls any more (all left or unreachable): through the head.
        return sent
          ? sent.then(
              (r): RunAnswer => ({
                outputs: mapFromWire(r.outputs, 'output'),
                trace: undefined,
                version: this.#router?.versionOf(deployment),
              }),
              (err: unknown) =>
                err instanceof TroupeError && err.code === 'TROUPE_ERR_NOT_READY'
                  ? this.#viaHead(id, deployment, tensors, refs, options, deadline)
                  : Promise.reject(err),
            )
          : this.#viaHead(id, deployment, tensors, refs, options, deadline);
      };
      return { answer: withRetries(this.#conn, policy, attempt), resolvedHere: true };
    }
    return {
      answer: withRetries(this.#conn, policy, () => this.#viaHead(id, deployment, tensors, refs, options, deadline)),
      resolvedHere: false,
    };
  }

  /** One attempt of a run through the head. */
  #viaHead(
    id: string,
    deployment: string,
    tensors: Record<string, Tensor>,
    refs: Record<string, RunRef>,
    options: RunOptions,
    deadline: number | undefined,
  ): Promise<RunAnswer> {
    // Sent synchronously, so a run that names this one's future always reaches the head after it.
    const message: Omit<Extract<ClientToHead, { type: 'run' }>, 'id'> & { id: string } = {
      type: 'run',
      id,
      deployment,
      inputs: mapToWire(tensors),
    };
    if (Object.keys(refs).length > 0) message.refs = refs;
    if (options.outputs) message.outputs = options.outputs;
    // The head enforces the deadline and says which step it stopped; this timer is only the
    // backstop for a head that does not answer, so it gives the head's answer time to arrive.
    // A retry resends the same id (a later run naming this future still finds it) with the time left.
    if (deadline !== undefined) message.timeoutMs = Math.max(1, deadline - Date.now());
    if (options.trace) message.trace = true;
    if (options.model !== undefined) message.model = options.model;
    return this.#conn
      .request(message, message.timeoutMs === undefined ? undefined : message.timeoutMs + DEADLINE_GRACE_MS)
      .then((value) => ({ outputs: mapFromWire(value.outputs, 'output'), trace: value.trace, version: value.version }));
  }

  /**
   * Runs a graph whose steps stream (a generator method step) and gives the last step's outputs
   * item by item, as they are produced, to read with `for await`. The run is at most `window`
   * items ahead of the reader, and each streaming step a bounded window ahead of the next, so a
   * slow reader slows the first producer; leaving the loop stops every step. A graph that does
   * not stream, or a single deployment, gives one item: its answer.
   *
   * @example
   * for await (const { token } of cluster.stream('generate', { prompt })) console.log(token!.data);
   */
  stream(deployment: string, inputs: Record<string, Tensor>, options: StreamRunOptions = {}): ActorStream<Outputs> {
    return openRunStream(this.#conn, this.#streams, deployment, inputs, options);
  }

  /**
   * Deploys a class actor (instances of a class from a module on the agents, docs/actors.md) and
   * resolves with a handle on it once its instances are READY.
   *
   * @example
   * const counter = await cluster.actor({ name: 'counter', module: 'counter.js', export: 'Counter', args: [10], cpus: 0.1 });
   * console.log(await counter.call('add', 5)); // 15
   */
  async actor(spec: ActorSpec, options?: DeployOptions): Promise<ActorHandle> {
    // A name here is the likeliest slip (a handle on a deployed actor is actorHandle's): say so,
    // rather than a spec error listing the string's characters as unknown keys.
    if (typeof spec === 'string')
      throw new TroupeError(
        'TROUPE_ERR_BAD_SPEC',
        `cluster.actor(spec) deploys a class actor and takes its spec; for a handle on the deployed actor '${String(spec).slice(0, 64)}' use cluster.actorHandle('${String(spec).slice(0, 64)}')`,
      );
    await this.deploy(actorDeployment(spec), options);
    return this.actorHandle(spec.name);
  }

  /** A handle on a class actor deployed earlier (by any client, HTTP or the CLI); nothing is sent until a call. */
  actorHandle(name: string): ActorHandle {
    return new ActorHandle(name, this.actorTransport);
  }

  /** @internal How this client's actor handles reach the head (a class actor binds handles it receives to it). */
  get actorTransport(): ActorTransport {
    const conn = this.#conn;
    const states = this.#actorStates;
    return {
      call: (message, timeoutMs) => states.remember(message.actor, conn.request(states.withSeen(message), timeoutMs)),
      // A stream has no overall deadline: its reader paces it, and cancels it.
      stream: (message, stream) => this.#streams.add(stream, states.remember(message.actor, conn.request(states.withSeen(message)))),
      credit: (stream, n) => void conn.request({ type: 'streamCredit', stream, n }, 30_000).catch(() => {}),
      cancel: (stream) => void conn.request({ type: 'streamCancel', stream }, 30_000).catch(() => {}),
      cancelCall: (call) => void conn.request({ type: 'cancel', call }, 30_000).catch(() => {}),
    };
  }

  /** Nodes, deployments and actors as the head sees them now. */
  async describe(): Promise<ClusterView> {
    const deadline = Date.now() + 30_000;
    return withRetries(this.#conn, { retries: this.#retries, deadline }, () => this.#conn.request({ type: 'describe' }, 30_000));
  }

  /** How much of this client's input went through shared memory, or why none can. */
  get sharedMemory(): SharedMemoryStats {
    const pool = this.#router?.sharedMemory ?? 'runs do not go to replicas directly (direct: false)';
    return typeof pool === 'string' ? { off: pool, regions: 0, bytes: 0, tensors: 0 } : pool.stats;
  }

  /** Closes the connection (no reconnect after it); calls still waiting reject with TROUPE_ERR_CONNECTION_CLOSED. */
  async close(): Promise<void> {
    this.#router?.close();
    await this.#conn.close();
  }
}
