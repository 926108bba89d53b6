import { cpus as osCpus, hostname, totalmem } from 'node:os';
import { WebSocket } from 'ws';
import {
  AGENT_LEAVING,
  HEAD_SHUTTING_DOWN,
  AgentToHeadReplies,
  Channel,
  clientSocketOptions,
  createLogger,
  defaultMaxActors,
  HeadToAgentSchema,
  Reconnect,
  resolveModelPath,
  TroupeError,
  DEFAULT_MAX_FRAME_BYTES,
  isSecureUrl,
} from '../runtime/internal.js';
import type { ActorToRelayIpc, AgentToHead, Gpu, HeadToAgent, NodeResources, TlsClientOptions } from '../runtime/internal.js';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { ActorProcess, CLASS_ACTOR_ENTRY, FN_ACTOR_ENTRY, MULTIPLEX_ACTOR_ENTRY } from './actor-process.js';
import { resolveFnRef } from './fn-path.js';
import { GpuSampler } from './gpu-sampler.js';
import { discoverGpus } from './gpus/index.js';

/** The agent's end of its connection to the head: it registers with a request. */
type HeadChannel = Channel<HeadToAgent, AgentToHead, typeof AgentToHeadReplies>;
import { DEFAULT_HEALTH } from './health.js';
import type { HealthOptions } from './health.js';
import { ActorLedger } from './orphans.js';
import { processUsage } from './proc-stats.js';
import { resolveLabelFiles } from './label-files.js';
import { resolveModel } from './model-cache.js';
import { ActorLinkRelay } from './actor-link-relay.js';

export interface AgentOptions {
  /** The head's WebSocket address, e.g. ws://127.0.0.1:8470. */
  headUrl: string;
  token?: string;
  /** This node's name in the cluster (default: the host name). */
  name?: string;
  /**
   * The address this node is reachable at, as the head should show it (a host name or IP); by
   * default the head records the address the agent's connection came from.
   */
  advertise?: string;
  /** Deployments name model files relative to this directory; nothing outside it is opened. */
  modelDir: string;
  /**
   * fn steps name modules (`path#export`) relative to this directory. No default: fn steps run
   * arbitrary code, so an agent offers them only when told where its modules are.
   */
  moduleDir?: string;
  /** Pretend this node has N GPUs (for machines without one); actors run on the CPU provider. */
  simulateGpus?: number;
  simulatedGpuMemoryMiB?: number;
  /** CPUs offered to the scheduler (default: all cores). */
  cpus?: number;
  /** Most actor processes the head places here (default: 8 per offered CPU). */
  maxActors?: number;
  /** Host memory offered to the scheduler, in bytes (default: the machine's total). */
  memoryBytes?: number;
  heartbeatMs?: number;
  /** Actor health checks (ping interval, idle timeout, longest allowed inference). */
  health?: Partial<HealthOptions>;
  /** Where the agent keeps the ledger of actors it runs (default: a folder in the temp dir named after the node). */
  stateDir?: string;
  /** nvidia-smi to run (default: the one on PATH). */
  nvidiaSmi?: string;
  /** How often real GPUs are sampled (default 5 s). */
  gpuSampleMs?: number;
  /**
   * How this node's actors reach the head: each over a connection of its own (`direct`, the
   * default), or relayed over this agent's connection (`relay`: the head then holds one socket per
   * node, not one per actor; see actor-link-relay.ts).
   */
  actorLinks?: 'direct' | 'relay';
  /**
   * For a `wss:`/`https:` head: the CA its certificate is verified against (default: Node's roots),
   * and a client certificate and key for a head that asks agents for one (`--tls-agent-ca`). Actors
   * get the CA (TROUPE_HEAD_CA, PEM), never the client key: the head does not ask them for one.
   */
  tls?: TlsClientOptions;
}

type StartActor = Extract<HeadToAgent, { type: 'startActor' }>;
type StopActor = Extract<HeadToAgent, { type: 'stopActor' }>;

/**
 * The node agent: the control plane of one machine. It registers the machine's resources with
 * the head, sends heartbeats, and spawns, supervises and stops actor processes on the head's
 * command. It never loads a model or touches CUDA itself.
 */
export class NodeAgent {
  readonly #options: AgentOptions;
  readonly #log = createLogger('agent');
  readonly #actors = new Map<string, ActorProcess>();
  #channel: HeadChannel | undefined;
  #gpus: Gpu[] = [];
  #heartbeat: NodeJS.Timeout | undefined;
  readonly #reconnect = new Reconnect(
    () => {
      this.#connect().catch((err: unknown) => {
        this.#log.warn({ err: (err as Error).message }, 'reconnect failed');
        this.#onDisconnect();
      });
    },
    { keepsProcessAlive: true },
  );
  #stopping = false;
  /** Where this node's actors listen for direct calls from clients (see actors/direct-server.ts). */
  #dataHost: string | undefined;
  #ledger: ActorLedger | undefined;
  #sampler: GpuSampler | undefined;
  /** The connection once the head accepted this node's registration: only that one relays actors' links. */
  #registered: HeadChannel | undefined;
  /** Under TLS, the head's certificate and key for this node's replicas' direct ports (from the registration's reply; memory only). */
  #directTls: { cert: string; key: string } | undefined;
  readonly #relay = new ActorLinkRelay(() => (this.#registered && !this.#registered.closed ? this.#registered : undefined), this.#log);

  constructor(options: AgentOptions) {
    this.#options = options;
  }

  get name(): string {
    return (
      this.#options.name ??
      hostname()
        .replace(/[^A-Za-z0-9._-]/g, '-')
        .slice(0, 63)
    );
  }

  /** Discovers resources, connects and registers; resolves once the head has accepted this node. */
  async start(): Promise<void> {
    const simulate = this.#options.simulateGpus;
    this.#gpus = await discoverGpus({
      ...(simulate !== undefined ? { simulate } : {}),
      ...(this.#options.simulatedGpuMemoryMiB !== undefined ? { simulatedMemoryMiB: this.#options.simulatedGpuMemoryMiB } : {}),
      ...(this.#options.nvidiaSmi ? { command: this.#options.nvidiaSmi } : {}),
    });
    this.#ledger = new ActorLedger(join(this.#options.stateDir ?? join(tmpdir(), `troupe-agent-${this.name}`), 'actors.json'));
    const orphans = await this.#ledger.killOrphans();
    if (orphans.length > 0) this.#log.warn({ pids: orphans }, 'killed actors left running by an earlier run of this agent');
    this.#sampler = new GpuSampler(this.#gpus, this.#options.gpuSampleMs ?? 5000, this.#options.nvidiaSmi);
    await this.#connect();
  }

  /** Stops every actor (SIGTERM, then SIGKILL after `graceMs`) and leaves the cluster. */
  async stop(graceMs = 5000): Promise<void> {
    this.#stopping = true;
    this.#reconnect.stop();
    clearInterval(this.#heartbeat);
    this.#sampler?.stop();
    // Leave first: the head then reschedules our actors at once instead of counting crashes.
    this.#channel?.close(1000, AGENT_LEAVING);
    await Promise.all([...this.#actors.values()].map((a) => a.stop(graceMs)));
    // None runs now: the list says so, and its last write is done before the process exits (an
    // exit mid-write left a 0-byte temp file and the list of dead pids behind).
    await this.#ledger?.record([]);
  }

  #resources(): NodeResources {
    const cpus = this.#options.cpus ?? osCpus().length;
    return {
      cpus,
      memoryBytes: this.#options.memoryBytes ?? totalmem(),
      maxActors: this.#options.maxActors ?? defaultMaxActors(cpus),
      gpus: this.#gpus,
    };
  }

  async #connect(): Promise<void> {
    const headers: Record<string, string> = {};
    if (this.#options.token) headers.authorization = `Bearer ${this.#options.token}`;
    const url = new URL('/v1/agent', this.#options.headUrl);
    const { ca, cert, key } = this.#options.tls ?? {};
    // A wss: URL is TLS or nothing: a failed handshake is an error, never a retry in clear.
    const ws = new WebSocket(url, {
      ...clientSocketOptions(headers),
      ...(ca !== undefined ? { ca } : {}),
      ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
    });
    // The address this machine reaches the head from is the one its actors take direct calls on:
    // whoever reaches the head can reach it (a container's or a VM's own address, or loopback).
    ws.once('upgrade', (res) => (this.#dataHost = res.socket.localAddress?.replace(/^::ffff:(?=\d+\.)/, '') ?? this.#dataHost));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('unexpected-response', (_req, res) => {
        ws.terminate();
        const refusal = String(res.headers['x-troupe-error'] ?? `HTTP ${res.statusCode}`);
        reject(
          new TroupeError(
            res.statusCode === 401 ? 'TROUPE_ERR_UNAUTHORIZED' : 'TROUPE_ERR_CONNECTION_CLOSED',
            `head refused this agent: ${refusal}`,
          ),
        );
      });
      ws.once('error', (err) =>
        reject(new TroupeError('TROUPE_ERR_CONNECTION_CLOSED', `cannot reach the head at ${url.href}: ${err.message}`)),
      );
    });
    const channel: HeadChannel = new Channel<HeadToAgent, AgentToHead, typeof AgentToHeadReplies>(ws, {
      replies: AgentToHeadReplies,
      schema: HeadToAgentSchema,
      // It carries actors' frames whole, each within the relay's own bound, inside its envelope.
      maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
      onMessage: (message) => this.#onMessage(message),
      onClose: (_code, reason) => this.#onDisconnect(reason === HEAD_SHUTTING_DOWN),
    });
    this.#channel = channel;
    try {
      const registered = await channel.request(
        {
          type: 'register',
          name: this.name,
          ...(this.#options.advertise ? { address: this.#options.advertise } : {}),
          resources: this.#resources(),
          actors: [...this.#actors.values()].map((a) => ({ actorId: a.actorId, pid: a.pid })),
        },
        10_000,
      );
      // Only from a head reached over TLS: a key that came in clear is no secret to guard.
      this.#directTls = isSecureUrl(url) ? registered.directTls : undefined;
    } catch (err) {
      // A refused registration leaves no connection behind that could carry anything for this node.
      channel.close(1000, 'registration refused');
      throw err;
    }
    this.#registered = channel;
    this.#reconnect.succeeded();
    this.#log.info({ head: url.href, node: this.name, gpus: this.#gpus.length }, 'registered with the head');
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => void this.#sendHeartbeat(channel), this.#options.heartbeatMs ?? 1000);
  }

  async #sendHeartbeat(channel: HeadChannel): Promise<void> {
    const actors = [...this.#actors.values()];
    const usage = await Promise.all([processUsage(process.pid), ...actors.map((a) => processUsage(a.pid))]);
    const processes = usage.flatMap((u, i) => (u ? [{ actorId: i === 0 ? null : actors[i - 1]!.actorId, ...u }] : []));
    const sample = this.#sampler?.latest;
    if (!sample) return channel.send({ type: 'heartbeat', processes });
    const byPid = new Map(actors.map((a) => [a.pid, a.actorId]));
    const actorGpuMemory = sample.processes.flatMap((p) => {
      const actorId = byPid.get(p.pid);
      return actorId ? [{ actorId, usedMemoryMiB: p.usedMemoryMiB }] : [];
    });
    channel.send({ type: 'heartbeat', gpus: sample.gpus, actorGpuMemory, processes });
  }

  #recordActors(): void {
    void this.#ledger?.record([...this.#actors.values()].map((a) => ({ actorId: a.actorId, pid: a.pid })));
  }

  #onDisconnect(headStopped = false): void {
    clearInterval(this.#heartbeat);
    this.#registered = undefined;
    this.#relay.headLost();
    if (this.#stopping) return;
    const retryInMs = this.#reconnect.schedule();
    // A head that said it is stopping was stopped on purpose (a restart, npm start's Ctrl-C): news.
    if (headStopped) this.#log.info({ retryInMs }, 'the head stopped; reconnecting until it is back');
    else this.#log.warn({ retryInMs }, 'lost the head; reconnecting');
  }

  #onMessage(message: HeadToAgent): void {
    switch (message.type) {
      case 'startActor':
        this.#startActor(message).then(
          (pid) => this.#channel?.reply(message.id, { pid }),
          (err: unknown) => this.#channel?.fail(message.id, err),
        );
        return;
      case 'stopActor':
        void this.#stopActor(message).then(() => this.#channel?.reply(message.id, {}));
        return;
      case 'actorFrame':
      case 'actorClose':
        this.#relay.fromHead(message);
        return;
      default:
        // Replies to our own requests are settled by the channel before they get here.
        return;
    }
  }

  async #startActor(message: StartActor): Promise<number> {
    if (this.#stopping) throw new TroupeError('TROUPE_ERR_SHUTTING_DOWN', `agent ${this.name} is shutting down`);
    if (this.#actors.has(message.actorId)) return this.#actors.get(message.actorId)!.pid;
    // fn and class actors run a module from --module-dir (actors/fn-host, actors/class-host); a model actor loads an ONNX file.
    const code = message.kind === 'fn' || message.kind === 'class';
    const named = code ? (message.fn ?? message.model) : message.model;
    // Refusals name the path as the deploy gave it; the directories stay in this agent's log.
    const refused = (err: unknown): never => {
      this.#log.warn(
        { actor: message.actorId, named, modelDir: this.#options.modelDir, moduleDir: this.#options.moduleDir ?? null },
        `refused: ${(err as Error).message}`,
      );
      throw err;
    };
    const fn = code
      ? await resolveFnRef(this.#options.moduleDir, named, message.kind === 'class' ? 'class' : 'fn').catch(refused)
      : undefined;
    const modelPath = fn
      ? undefined
      : message.multiplex
        ? await resolveModelPath(this.#options.modelDir, message.model, undefined, 'directory').catch(refused)
        : await resolveModel(this.#options, message.model).catch(refused);
    const labelFiles =
      modelPath && message.labelFiles
        ? await resolveLabelFiles(this.#options.modelDir, message.model, message.labelFiles, message.multiplex !== undefined).catch(refused)
        : undefined;
    const simulated = message.gpus.length > 0 && message.gpus.every((i) => this.#gpus.find((g) => g.index === i)?.simulated);
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && key !== 'TROUPE_TOKEN') env[key] = value;
    Object.assign(env, {
      TROUPE_HEAD_URL: this.#options.headUrl,
      TROUPE_ACTOR_ID: message.actorId,
      TROUPE_ACTOR_SECRET: message.secret,
      ...(!fn
        ? { TROUPE_MODEL_PATH: modelPath }
        : message.kind === 'class'
          ? { TROUPE_CLASS_MODULE: fn.path, TROUPE_CLASS_EXPORT: fn.exportName, TROUPE_CLASS_ARGS: JSON.stringify(message.args ?? []) }
          : { TROUPE_FN_MODULE: fn.path, TROUPE_FN_EXPORT: fn.exportName }),
      TROUPE_SHOWN_PATH: fn ? named.slice(0, named.lastIndexOf('#')) : named,
      TROUPE_DEVICE: message.gpus.length === 0 ? 'cpu' : simulated ? 'simulated-gpu' : 'cuda',
      // Exactly the actor's GPUs; none for CPU actors, so they can never create a CUDA context.
      CUDA_VISIBLE_DEVICES: message.gpus.join(','),
    });
    if (message.deployment) env.TROUPE_DEPLOYMENT = message.deployment;
    // A method may await forever with its event loop idle, which health checks cannot see: the instance bounds its own calls.
    if (message.kind === 'class' && message.maxConcurrency !== undefined) env.TROUPE_MAX_CONCURRENCY = String(message.maxConcurrency);
    if (message.kind === 'class' && message.concurrencyGroups !== undefined)
      env.TROUPE_CONCURRENCY_GROUPS = JSON.stringify(message.concurrencyGroups);
    if (message.kind === 'class') env.TROUPE_MAX_CALL_MS = String(this.#options.health?.maxInferenceMs ?? DEFAULT_HEALTH.maxInferenceMs);
    if (this.#dataHost) env.TROUPE_DATA_HOST = this.#dataHost;
    if (message.threads !== undefined) env.TROUPE_THREADS = String(message.threads);
    if (message.instances !== undefined) env.TROUPE_INSTANCES = String(message.instances);
    if (message.batch) env.TROUPE_BATCH = JSON.stringify(message.batch);
    if (message.idleSpinMs !== undefined) env.TROUPE_IDLE_SPIN_MS = String(message.idleSpinMs);
    if (message.autoLayoutReplicas !== undefined) env.TROUPE_AUTO_LAYOUT_REPLICAS = String(message.autoLayoutReplicas);
    if (message.autoReplicas) env.TROUPE_AUTO_REPLICAS = '1';
    if (message.multiplex) env.TROUPE_MULTIPLEX = JSON.stringify(message.multiplex);
    // The CA is public: actors verify the head with it (their links need no client certificate).
    const ca = this.#options.tls?.ca;
    if (ca !== undefined && isSecureUrl(this.#options.headUrl)) env.TROUPE_HEAD_CA = ca.toString();
    const relayed = this.#options.actorLinks === 'relay';
    // A model actor's direct port serves TLS with the head's certificate, asked for over IPC (actors/direct-tls.ts).
    const directTls = !fn && !message.multiplex ? this.#directTls : undefined;
    if (directTls) env.TROUPE_DIRECT_TLS = '1';
    if (relayed) env.TROUPE_HEAD_LINK = 'agent';
    if (labelFiles) {
      env.TROUPE_LABEL_FILES = JSON.stringify(labelFiles);
      env.TROUPE_SHOWN_LABEL_FILES = JSON.stringify(message.labelFiles);
    }
    const actor: ActorProcess = new ActorProcess({
      actorId: message.actorId,
      env,
      health: { ...DEFAULT_HEALTH, ...this.#options.health },
      ...(relayed ? { relay: (ipc: ActorToRelayIpc) => this.#relay.fromActor(actor, message.secret, ipc) } : {}),
      ...(directTls ? { directTls } : {}),
      ...(fn
        ? { entry: message.kind === 'class' ? CLASS_ACTOR_ENTRY : FN_ACTOR_ENTRY }
        : message.multiplex
          ? { entry: MULTIPLEX_ACTOR_ENTRY }
          : {}),
    });
    this.#actors.set(message.actorId, actor);
    this.#recordActors();
    void actor.exited.then((exit) => {
      this.#actors.delete(message.actorId);
      this.#relay.actorGone(message.actorId);
      this.#recordActors();
      if (exit.killedBecause) this.#log.warn({ actor: message.actorId, why: exit.killedBecause }, 'killed a hung actor');
      this.#channel?.send({ type: 'actorExited', actorId: message.actorId, ...exit });
    });
    return actor.pid;
  }

  async #stopActor(message: StopActor): Promise<void> {
    await this.#actors.get(message.actorId)?.stop(message.graceMs);
  }
}
