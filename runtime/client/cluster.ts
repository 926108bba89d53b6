import { WebSocket } from 'ws';
import { TroupeError } from '../errors.js';
import { newId } from '../ids.js';
import { HeadToClientSchema } from '../protocol/client.js';
import type { ClientToHead, HeadToClient } from '../protocol/client.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../protocol/codec.js';
import type { ModelDeploymentInput } from '../spec.js';
import type { Tensor } from '../tensor/tensor.js';
import { mapFromWire, mapToWire, WireTensorMapSchema } from '../tensor/wire.js';
import { Channel } from '../transport/channel.js';
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
import { Future, FutureOutput } from './future.js';
import type { Outputs } from './future.js';

/** Run inputs: tensors, or outputs of earlier runs (a whole Future, or `future.output(name)`). */
export type RunInputs = Record<string, Tensor | Future | FutureOutput>;

export interface ConnectOptions {
  /** The cluster token; required when the head listens beyond loopback. */
  token?: string;
  /** Give up connecting after this long (default 10 s). */
  connectTimeoutMs?: number;
}

export interface RunOptions {
  /** Fail with TROUPE_ERR_DEADLINE_EXCEEDED if no answer comes within this time. */
  timeoutMs?: number;
  /** Return only these outputs. */
  outputs?: string[];
  /** Record per-step timings; read them with `future.trace()`. */
  trace?: boolean;
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
  readonly #channel: Channel<HeadToClient, ClientToHead>;

  /** @internal use {@link connect} */
  constructor(channel: Channel<HeadToClient, ClientToHead>) {
    this.#channel = channel;
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
    const value = await this.#channel.request({ type: 'deploy', spec: wire, ...(options.wait === false ? { wait: false } : {}) }, options.timeoutMs ?? 120_000);
    return looksLikeGraphDocument(wire) ? GraphDeploymentViewSchema.parse(value) : DeploymentViewSchema.parse(value);
  }

  /** Drains and removes a deployment. */
  async undeploy(name: string): Promise<void> {
    await this.#channel.request({ type: 'undeploy', name }, 60_000);
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
    const backstop = options.timeoutMs === undefined ? undefined : options.timeoutMs + DEADLINE_GRACE_MS;
    const answer = this.#channel.request(message, backstop).then((raw) => {
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
    return ClusterViewSchema.parse(await this.#channel.request({ type: 'describe' }, 30_000));
  }

  /** Closes the connection; calls still waiting reject with TROUPE_ERR_CONNECTION_CLOSED. */
  async close(): Promise<void> {
    if (this.#channel.closed) return;
    this.#channel.close(1000, 'client closed');
    const timer = setTimeout(() => this.#channel.terminate(), 2000);
    await this.#channel.whenClosed;
    clearTimeout(timer);
  }
}

/** Opens a connection to a head at `ws://host:port` (or `http://`, which is rewritten). */
export async function connect(url: string, options: ConnectOptions = {}): Promise<Cluster> {
  const wsUrl = new URL('/v1/client', url.replace(/^http/, 'ws'));
  const headers: Record<string, string> = {};
  const token = options.token ?? process.env.TROUPE_TOKEN;
  if (token) headers.authorization = `Bearer ${token}`;
  const ws = new WebSocket(wsUrl, { headers, maxPayload: DEFAULT_MAX_FRAME_BYTES, perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `could not connect to ${wsUrl.href} within ${options.connectTimeoutMs ?? 10_000} ms`));
    }, options.connectTimeoutMs ?? 10_000);
    ws.once('open', () => {
      clearTimeout(timer);
      resolve();
    });
    ws.once('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      ws.terminate();
      const code = res.statusCode === 401 ? 'TROUPE_ERR_UNAUTHORIZED' : 'TROUPE_ERR_CONNECTION_CLOSED';
      reject(new TroupeError(code, `head refused the connection: HTTP ${res.statusCode} ${res.headers['x-troupe-error'] ?? ''}`.trim()));
    });
    ws.once('error', (err) => {
      clearTimeout(timer);
      reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `could not connect to ${wsUrl.href}: ${err.message}`));
    });
  });
  // The head only ever answers requests, so there are no unsolicited messages to handle.
  const channel = new Channel<HeadToClient, ClientToHead>(ws, { schema: HeadToClientSchema, onMessage: () => {} });
  return new Cluster(channel);
}
