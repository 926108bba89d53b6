import { TroupeError } from '../errors.js';
import { newId } from '../ids.js';
import type { ClientToHead } from '../protocol/client.js';
import type { ModelDeploymentInput } from '../spec.js';
import type { Tensor } from '../tensor/tensor.js';
import { mapFromWire, mapToWire, WireTensorMapSchema } from '../tensor/wire.js';
import { ClusterViewSchema, DeploymentViewSchema } from '../views.js';
import type { ClusterView, DeploymentView } from '../views.js';
import { isGraphStep } from '../graph/builder.js';
import type { GraphStep } from '../graph/builder.js';
import { looksLikeGraphDocument } from '../graph/schema.js';
import type { GraphDocument } from '../graph/schema.js';
import { RunTraceSchema } from '../graph/trace.js';
import type { RunTrace } from '../graph/trace.js';
import { GraphDeploymentViewSchema } from '../graph/view.js';
import type { GraphDeploymentView } from '../graph/view.js';
import type { RunRef } from '../protocol/client.js';
import { HeadConnection, withRetries } from './connection.js';
import { Future, FutureOutput } from './future.js';
import type { Outputs } from './future.js';

/** Run inputs: tensors, or outputs of earlier runs (a whole Future, or `future.output(name)`). */
export type RunInputs = Record<string, Tensor | Future | FutureOutput>;

export interface ConnectOptions {
  /** The cluster token; required when the head listens beyond loopback. */
  token?: string;
  /** Give up connecting after this long (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * Retries of a run, deploy or describe that fails with a retryable error (`err.retryable`:
   * the connection dropped, the head restarted or drains, a replica died, a queue was full),
   * backing off from 50 ms to 1 s and waiting for the connection to come back. Default 0: the
   * error reaches the caller. Inference is idempotent, so a retried run is safe.
   */
  retries?: number;
  /** Reconnect (with back-off) when the connection drops (default true). */
  reconnect?: boolean;
}

export interface RunOptions {
  /** Fail with TROUPE_ERR_DEADLINE_EXCEEDED if no answer comes within this time. */
  timeoutMs?: number;
  /** Return only these outputs. */
  outputs?: string[];
  /** Record per-step timings; read them with `future.trace()`. */
  trace?: boolean;
  /** Retries of this run on a retryable error (default: the connection's `retries`); all within `timeoutMs`. */
  retries?: number;
}

/** How long past a run's deadline the SDK waits for the head's own deadline error. */
const DEADLINE_GRACE_MS = 2000;

export interface DeployOptions {
  /** How long to wait for every replica to be READY (default 120 s). */
  timeoutMs?: number;
  /** false: return at once, with actors as they are (e.g. PENDING with a reason). Default true. */
  wait?: boolean;
}

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

  /** @internal use {@link connect} */
  constructor(conn: HeadConnection, retries = 0) {
    this.#conn = conn;
    this.#retries = retries;
  }

  /** Whether the connection to the head is up now (it reconnects by itself after a drop). */
  get connected(): boolean {
    return this.#conn.connected;
  }

  /**
   * Deploys (or updates) one model and resolves once all its replicas are READY; or deploys a
   * graph (built with `pipeline`, `ensemble`, ... or its JSON form): its models and fns, then the
   * graph itself, checked against their metadata, and runnable by name.
   */
  async deploy(spec: ModelDeploymentInput, options?: DeployOptions): Promise<DeploymentView>;
  async deploy(graph: GraphStep | GraphDocument, options?: DeployOptions): Promise<GraphDeploymentView>;
  async deploy(spec: ModelDeploymentInput | GraphStep | GraphDocument, options: DeployOptions = {}): Promise<DeploymentView | GraphDeploymentView> {
    const wire = isGraphStep(spec) ? spec.toJSON() : spec;
    const timeoutMs = options.timeoutMs ?? 120_000;
    // Deploying is declarative (saying it twice changes nothing), so a retry is safe.
    const value = await withRetries(this.#conn, { retries: this.#retries, deadline: Date.now() + timeoutMs }, () =>
      this.#conn.request({ type: 'deploy', spec: wire, ...(options.wait === false ? { wait: false } : {}) }, timeoutMs),
    );
    return looksLikeGraphDocument(wire) ? GraphDeploymentViewSchema.parse(value) : DeploymentViewSchema.parse(value);
  }

  /** Drains and removes a deployment. */
  async undeploy(name: string): Promise<void> {
    await this.#conn.request({ type: 'undeploy', name }, 60_000);
  }

  /**
   * Runs a deployment or a graph on named inputs; returns a future of its named outputs at once.
   * An input may be another run's Future (or `future.output(name)`): the request goes out now and
   * the head feeds that run's result in when it is ready, without a round trip through here.
   */
  run(deployment: string, inputs: RunInputs, options: RunOptions = {}): Future<Outputs> {
    const id = newId();
    const tensors: Record<string, Tensor> = {};
    const refs: Record<string, RunRef> = {};
    for (const [name, value] of Object.entries(inputs)) {
      if (value instanceof Future) refs[name] = { run: value.id };
      else if (value instanceof FutureOutput) refs[name] = { run: value.run, output: value.output };
      else tensors[name] = value;
    }
    // Sent synchronously, so a run that names this one's future always reaches the head after it.
    const message: Omit<Extract<ClientToHead, { type: 'run' }>, 'id'> & { id: string } = {
      type: 'run',
      id,
      deployment,
      inputs: mapToWire(tensors),
    };
    if (Object.keys(refs).length > 0) message.refs = refs;
    if (options.outputs) message.outputs = options.outputs;
    if (options.timeoutMs !== undefined) message.timeoutMs = options.timeoutMs;
    if (options.trace) message.trace = true;
    // The head enforces the deadline and says which step it stopped; this timer is only the
    // backstop for a head that does not answer, so it gives the head's answer time to arrive.
    // A retry resends the same id (a later run naming this future still finds it) with the time
    // left; the first attempt goes out synchronously.
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    const attempt = () => {
      if (deadline !== undefined) message.timeoutMs = Math.max(1, deadline - Date.now());
      return this.#conn.request(message, message.timeoutMs === undefined ? undefined : message.timeoutMs + DEADLINE_GRACE_MS);
    };
    const answer = withRetries(this.#conn, { retries: options.retries ?? this.#retries, deadline }, attempt).then((raw) => {
      const value = raw as { outputs?: unknown; trace?: unknown } | undefined;
      const outputs = WireTensorMapSchema.safeParse(value?.outputs);
      if (!outputs.success) throw new TroupeError('TROUPE_ERR_INTERNAL', 'head sent outputs that are not tensors');
      const trace = value?.trace === undefined ? undefined : RunTraceSchema.safeParse(value.trace);
      if (trace && !trace.success) throw new TroupeError('TROUPE_ERR_INTERNAL', 'head sent a malformed trace');
      return { outputs: mapFromWire(outputs.data, 'output'), trace: trace?.data as RunTrace | undefined };
    });
    return new Future(id, answer.then((a) => a.outputs), answer.then((a) => a.trace));
  }

  /** Nodes, deployments and actors as the head sees them now. */
  async describe(): Promise<ClusterView> {
    const deadline = Date.now() + 30_000;
    return ClusterViewSchema.parse(await withRetries(this.#conn, { retries: this.#retries, deadline }, () => this.#conn.request({ type: 'describe' }, 30_000)));
  }

  /** Closes the connection (no reconnect after it); calls still waiting reject with TROUPE_ERR_CONNECTION_CLOSED. */
  async close(): Promise<void> {
    await this.#conn.close();
  }
}

/**
 * Opens a connection to a head at `ws://host:port` (or `http://`, which is rewritten). It stays
 * up: after a drop it reconnects with back-off, and calls made meanwhile fail with the retryable
 * TROUPE_ERR_CONNECTION_CLOSED, or are retried with `{ retries }`.
 */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Cluster> {
  const wsUrl = new URL('/v1/client', url.replace(/^http/, 'ws'));
  const conn = await HeadConnection.open(wsUrl, {
    token: options.token ?? process.env.TROUPE_TOKEN,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    reconnect: options.reconnect ?? true,
  });
  return new Cluster(conn, options.retries ?? 0);
}
