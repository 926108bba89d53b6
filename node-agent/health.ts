import { ActorToAgentIpcSchema } from '../runtime/internal.js';

export interface HealthOptions {
  /** How often the agent pings each actor. */
  intervalMs: number;
  /** An actor that has not answered for this long, and burned no CPU meanwhile, is hung. */
  timeoutMs: number;
  /** An actor silent for this long is hung even if it is computing (one inference this long is not normal). */
  maxInferenceMs: number;
}

export const DEFAULT_HEALTH: HealthOptions = { intervalMs: 1000, timeoutMs: 10_000, maxInferenceMs: 300_000 };

/**
 * Health of one actor, judged from its IPC answers and its CPU time. onnxruntime blocks the actor's
 * event loop for a whole inference, so silence alone does not mean hung: an actor inside a long
 * inference keeps burning CPU, a stopped or deadlocked one does not. Judging by CPU time keeps the
 * hot path free of per-call health messages.
 */
export class ActorHealth {
  readonly #options: HealthOptions;
  #seq = 0;
  #lastAnswer = Date.now();
  /** CPU seconds when the actor last answered. */
  #cpuAtAnswer: number | null = null;
  #cpuNow: number | null = null;

  constructor(options: HealthOptions) {
    this.#options = options;
  }

  /** The next ping to send. */
  ping(): { type: 'ping'; seq: number } {
    return { type: 'ping', seq: ++this.#seq };
  }

  /** Feeds one IPC message from the actor; ignores anything that is not a pong. */
  observe(raw: unknown): void {
    if (!ActorToAgentIpcSchema.safeParse(raw).success) return;
    this.#lastAnswer = Date.now();
    this.#cpuAtAnswer = this.#cpuNow;
  }

  /** Feeds the actor's CPU time (user + system seconds) as last read from /proc. */
  cpu(seconds: number | null): void {
    this.#cpuNow = seconds;
    if (this.#cpuAtAnswer === null) this.#cpuAtAnswer = seconds;
  }

  /** Why the actor counts as hung now, or null while it is healthy. */
  verdict(now = Date.now()): string | null {
    const silent = now - this.#lastAnswer;
    if (silent <= this.#options.timeoutMs) return null;
    if (silent > this.#options.maxInferenceMs)
      return `no answer to health checks for ${silent} ms (limit ${this.#options.maxInferenceMs} ms even while computing)`;
    const computing = this.#cpuNow !== null && this.#cpuAtAnswer !== null && this.#cpuNow - this.#cpuAtAnswer > 0.05 * (silent / 1000);
    return computing ? null : `no answer to health checks for ${silent} ms and no CPU used meanwhile`;
  }
}
