import { ActorToAgentIpcSchema } from '../runtime/index.js';

export interface HealthOptions {
  /** How often the agent pings each actor. */
  intervalMs: number;
  /** An idle actor that has not answered for this long is hung. */
  timeoutMs: number;
  /** An actor inside one inference for longer than this is hung too. */
  maxInferenceMs: number;
}

export const DEFAULT_HEALTH: HealthOptions = { intervalMs: 1000, timeoutMs: 10_000, maxInferenceMs: 300_000 };

/**
 * Health of one actor, judged from its IPC answers. onnxruntime blocks the actor's event loop for
 * a whole inference, so silence only means "hung" while the actor says it is idle, or when one
 * inference has lasted longer than anything reasonable.
 */
export class ActorHealth {
  readonly #options: HealthOptions;
  #seq = 0;
  #lastAnswer = Date.now();
  #busySince: number | null = null;

  constructor(options: HealthOptions) {
    this.#options = options;
  }

  /** The next ping to send. */
  ping(): { type: 'ping'; seq: number } {
    return { type: 'ping', seq: ++this.#seq };
  }

  /** Feeds one IPC message from the actor; ignores anything that is not a health message. */
  observe(raw: unknown): void {
    const parsed = ActorToAgentIpcSchema.safeParse(raw);
    if (!parsed.success) return;
    this.#lastAnswer = Date.now();
    if (parsed.data.type === 'busy') this.#busySince = Date.now();
    else if (parsed.data.type === 'idle') this.#busySince = null;
  }

  /** Why the actor counts as hung now, or null while it is healthy. */
  verdict(now = Date.now()): string | null {
    if (this.#busySince !== null) {
      const running = now - this.#busySince;
      return running > this.#options.maxInferenceMs ? `one inference has run for ${running} ms (limit ${this.#options.maxInferenceMs} ms)` : null;
    }
    const silent = now - this.#lastAnswer;
    return silent > this.#options.timeoutMs ? `no answer to health checks for ${silent} ms while idle` : null;
  }
}
