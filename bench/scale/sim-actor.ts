import {
  ACTOR_ID_HEADER,
  ACTOR_SECRET_HEADER,
  Channel,
  DEFAULT_MAX_FRAME_BYTES,
  HeadToActorSchema,
  openFrameTransport,
} from '../../runtime/internal.js';
import type { ActorStats, ActorToHead, FrameTransport, HeadToActor, ModelMetadata } from '../../runtime/internal.js';

/** What a simulated actor tells the head it serves: one float input, one float output, as a small MLP would. */
export const SIM_METADATA: ModelMetadata = {
  inputs: [{ name: 'x', dtype: 'float32', shape: ['batch', 64] }],
  outputs: [{ name: 'logits', dtype: 'float32', shape: ['batch', 10] }],
};

const IDLE_STATS: ActorStats = { calls: 0, batches: 0, rows: 0, expired: 0, failed: 0, computeMs: 0, queueMs: 0, queued: 0, inFlight: 0 };

/** The connection a real actor opens to the head: a frame stream to /v1/actor with its id and secret. */
export function openDirectLink(headUrl: string, actorId: string, secret: string): Promise<FrameTransport> {
  const headers = { [ACTOR_ID_HEADER]: actorId, [ACTOR_SECRET_HEADER]: secret };
  return openFrameTransport(new URL('/v1/actor', headUrl), headers, {
    maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
    pooled: false,
    timeoutMs: 30_000,
  });
}

/**
 * One actor without a process: it opens the link to the head a real actor opens (its own
 * connection, or one relayed by its node as `--actor-links relay` does), says `ready` as a real one does after loading its
 * model, and reports its stats as a real one does (actors/host.ts checks once a second and sends
 * only totals that changed): an idle actor reports once. With `statsEveryMs` it reports every
 * that often whatever changed, as a cluster whose every actor is busy would. It answers no calls:
 * the harness measures the control plane, not inference, and sends none.
 */
export class SimActor {
  readonly actorId: string;
  #channel: Channel<HeadToActor, ActorToHead> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  readonly #statsEveryMs: number;

  /** @param statsEveryMs 0: stats only when they change (never, after the first, for an idle actor). */
  constructor(actorId: string, statsEveryMs = 0) {
    this.actorId = actorId;
    this.#statsEveryMs = statsEveryMs;
  }

  /**
   * Opens its link (`open`: a connection of its own, see {@link openDirectLink}, or one its node
   * relays) and says `ready` (with the GPUs its start order gave it); resolves once `ready` has been handed on.
   */
  async start(open: () => Promise<FrameTransport>, gpus: number[]): Promise<void> {
    const transport = await open();
    if (this.#stopped) return transport.terminate();
    const channel = new Channel<HeadToActor, ActorToHead>(transport, {
      schema: HeadToActorSchema,
      // Calls are not served (closing would look like a crash): one would go unanswered until its deadline.
      onMessage: () => {},
      onClose: () => this.#stopTimer(),
    });
    this.#channel = channel;
    // A direct address as a real actor advertises one, so the routes the head pushes to SDK clients
    // are as large as real ones; nothing calls it (port 9 is discard).
    const direct = { url: `http://127.0.0.1:9/${this.actorId}`, token: `sim-token-${this.actorId}`.padEnd(16, '0') };
    channel.send({ type: 'ready', metadata: SIM_METADATA, device: 'gpu', provider: 'simulated', visibleDevices: gpus.join(','), direct });
    channel.send({ type: 'stats', stats: IDLE_STATS });
    if (this.#statsEveryMs === 0) return;
    this.#timer = setInterval(() => channel.send({ type: 'stats', stats: IDLE_STATS }), this.#statsEveryMs);
    this.#timer.unref();
  }

  /** The process is gone: its connection drops without a close handshake, as a killed process's does. */
  kill(): void {
    this.#stopped = true;
    this.#stopTimer();
    this.#channel?.terminate();
  }

  /** A stop order: the actor closes its connection and exits. */
  stop(): void {
    this.#stopped = true;
    this.#stopTimer();
    this.#channel?.close(1000, 'actor stopping');
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
  }
}
