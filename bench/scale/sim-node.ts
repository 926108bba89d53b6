import { WebSocket } from 'ws';
import { AgentToHeadReplies, Channel, clientSocketOptions, HeadToAgentSchema, RelayedTransport } from '../../runtime/internal.js';
import type { AgentToHead, FrameTransport, Gpu, HeadToAgent } from '../../runtime/internal.js';
import type { Limiter } from './limiter.js';
import { SimActor, openDirectLink } from './sim-actor.js';

type HeadChannel = Channel<HeadToAgent, AgentToHead, typeof AgentToHeadReplies>;
type StartActor = Extract<HeadToAgent, { type: 'startActor' }>;

export interface SimNodeOptions {
  headUrl: string;
  name: string;
  gpus: number;
  /** CPUs offered; with GPUs the scheduler's limit should be the GPUs, so this is generous. */
  cpus: number;
  memoryBytes: number;
  heartbeatMs: number;
  /** How often each actor reports stats whether or not they changed; 0 (default): as a real idle actor, once. */
  actorStatsMs?: number;
  /** How its actors reach the head: connections of their own, or relayed over this node's (`troupe agent --actor-links`). */
  actorLinks: 'direct' | 'relay';
  /** Every connection this node and its actors open goes through it (see limiter.ts). */
  connects: Limiter;
  /** Each start order, when it arrived and for which actor: the harness times placement and replacement from these. */
  onStart?: (order: StartActor, node: SimNode) => void;
  /** Each actor that said `ready`. */
  onReady?: (actorId: string, node: SimNode) => void;
}

const CONNECT_TIMEOUT_MS = 30_000;

/** The agent's WebSocket to the head, open; bounded as node-agent/agent.ts's is by its reconnects. */
function openAgentSocket(url: URL, name: string): Promise<WebSocket> {
  const ws = new WebSocket(url, { ...clientSocketOptions({}), handshakeTimeout: CONNECT_TIMEOUT_MS });
  return new Promise<WebSocket>((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`head refused ${name}: HTTP ${res.statusCode}`)));
  });
}

/** Fake pids: unique in the harness, positive, as the protocol asks. */
let nextPid = 100_000;

/**
 * One node agent without a machine: it registers over the real agent protocol (a WebSocket to
 * /v1/agent), heartbeats as node-agent/agent.ts does, and answers start orders by starting a
 * SimActor instead of a process. `kill` drops the connection and every actor's at once, as a
 * machine that loses power does; the head sees heartbeats stop and connections reset.
 */
export class SimNode {
  readonly name: string;
  readonly #options: SimNodeOptions;
  readonly actors = new Map<string, SimActor>();
  #channel: HeadChannel | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #dead = false;
  /** Its actors' links relayed over this node's connection, by actor id. */
  readonly #relayed = new Map<string, RelayedTransport>();

  constructor(options: SimNodeOptions) {
    this.#options = options;
    this.name = options.name;
  }

  get dead(): boolean {
    return this.#dead;
  }

  async start(): Promise<void> {
    const ws = await this.#options.connects.run(() => openAgentSocket(new URL('/v1/agent', this.#options.headUrl), this.name));
    const channel: HeadChannel = new Channel<HeadToAgent, AgentToHead, typeof AgentToHeadReplies>(ws, {
      replies: AgentToHeadReplies,
      schema: HeadToAgentSchema,
      onMessage: (message) => this.#onMessage(message),
      onClose: () => {
        clearInterval(this.#heartbeat);
        for (const link of this.#relayed.values()) link.ended(1006, "the agent's connection closed");
        this.#relayed.clear();
      },
    });
    this.#channel = channel;
    await channel.request({ type: 'register', name: this.name, resources: this.#resources(), actors: [] }, 60_000);
    // Simulated GPUs carry no samples, so a heartbeat is the bare message a CPU-only agent sends.
    this.#heartbeat = setInterval(() => channel.send({ type: 'heartbeat' }), this.#options.heartbeatMs);
    this.#heartbeat.unref();
  }

  #resources() {
    const gpus: Gpu[] = Array.from({ length: this.#options.gpus }, (_, index) => ({
      index,
      uuid: `GPU-sim-${this.name}-${index}`,
      name: 'Simulated GPU',
      memoryTotalMiB: 81_920,
      memoryUsedMiB: null,
      utilizationPct: null,
      simulated: true,
    }));
    return { cpus: this.#options.cpus, memoryBytes: this.#options.memoryBytes, maxActors: 4096, gpus };
  }

  #onMessage(message: HeadToAgent): void {
    const channel = this.#channel;
    if (!channel) return;
    if (message.type === 'startActor') {
      this.#options.onStart?.(message, this);
      const actor = this.actors.get(message.actorId) ?? new SimActor(message.actorId, this.#options.actorStatsMs);
      this.actors.set(message.actorId, actor);
      // The agent answers with the pid once the process is spawned, before the actor loads.
      channel.reply(message.id, { pid: nextPid++ });
      const open =
        this.#options.actorLinks === 'relay'
          ? () => this.#openRelayed(channel, message.actorId, message.secret)
          : () => this.#options.connects.run(() => openDirectLink(this.#options.headUrl, message.actorId, message.secret));
      actor.start(open, message.gpus).then(
        () => this.#options.onReady?.(message.actorId, this),
        () => this.#exited(message.actorId, 'could not reach the head'),
      );
      return;
    }
    if (message.type === 'actorFrame') return this.#relayed.get(message.actorId)?.deliver(message.frame);
    if (message.type === 'actorClose') {
      this.#relayed.get(message.actorId)?.ended(message.code, message.reason);
      this.#relayed.delete(message.actorId);
      return;
    }
    if (message.type === 'stopActor') {
      const actor = this.actors.get(message.actorId);
      actor?.stop();
      channel.reply(message.id, {});
      if (actor) this.#exited(message.actorId);
    }
  }

  /** An actor's link inside this node's connection, as node-agent/actor-link-relay.ts opens one. */
  async #openRelayed(channel: HeadChannel, actorId: string, secret: string): Promise<FrameTransport> {
    // A simulated actor opens its link once: its first opening, 0.
    await channel.request({ type: 'actorOpen', actorId, link: 0, secret }, CONNECT_TIMEOUT_MS);
    const link = new RelayedTransport({
      send: (frame) => channel.send({ type: 'actorFrame', actorId, link: 0, frame }),
      close: (code, reason) => {
        this.#relayed.delete(actorId);
        channel.send({ type: 'actorClose', actorId, link: 0, code, reason });
      },
      bufferedBytes: () => channel.bufferedBytes,
    });
    this.#relayed.set(actorId, link);
    return link;
  }

  /** As the agent does when an actor process ends: forget it and tell the head. */
  #exited(actorId: string, why?: string): void {
    if (!this.actors.delete(actorId)) return;
    this.#channel?.send({ type: 'actorExited', actorId, code: 0, signal: null, stderrTail: why ?? '' });
  }

  /** Kills one actor as SIGKILL would: its connection resets, and the agent reports the exit. */
  killActor(actorId: string): void {
    this.actors.get(actorId)?.kill();
    if (!this.actors.delete(actorId)) return;
    this.#channel?.send({ type: 'actorExited', actorId, code: null, signal: 'SIGKILL', stderrTail: '' });
  }

  /** The machine dies: no goodbye, no heartbeats, every connection reset. */
  kill(): void {
    this.#dead = true;
    clearInterval(this.#heartbeat);
    for (const actor of this.actors.values()) actor.kill();
    this.actors.clear();
    this.#channel?.terminate();
  }
}
