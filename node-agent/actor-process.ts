import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ActorToRelayIpcSchema, DirectTlsAskSchema, childNodeArgs } from '../runtime/internal.js';
import type { ActorToRelayIpc, DirectTlsIpc, RelayToActorIpc } from '../runtime/internal.js';
import { ActorHealth } from './health.js';
import { processUsage } from './proc-stats.js';
import type { HealthOptions } from './health.js';

// The agent starts actors by file, not by import: node-agent/ must not depend on actors/.
export const MODEL_ACTOR_ENTRY = fileURLToPath(new URL('../actors/host.js', import.meta.url));
/** The fn actor: runs one exported function of a module for graph steps. */
export const FN_ACTOR_ENTRY = fileURLToPath(new URL('../actors/fn-host.js', import.meta.url));
/** A multiplexed deployment's replica: a directory of models, loaded on demand (actors/multiplex-host.ts). */
export const MULTIPLEX_ACTOR_ENTRY = fileURLToPath(new URL('../actors/multiplex-host.js', import.meta.url));
/** The class actor: holds one instance of a user's class and runs its methods. */
export const CLASS_ACTOR_ENTRY = fileURLToPath(new URL('../actors/class-host.js', import.meta.url));

/** Keep this much of an actor's stderr to explain its death. */
const STDERR_TAIL_BYTES = 8192;

export interface ActorExit {
  code: number | null;
  signal: string | null;
  stderrTail: string;
  killedBecause?: string;
}

export interface ActorProcessOptions {
  actorId: string;
  env: Record<string, string>;
  health: HealthOptions;
  /** The script the child runs (default: the model actor). */
  entry?: string;
  /** The actor's link to the head goes through this agent: what the actor says about it over IPC. */
  relay?: (message: ActorToRelayIpc) => void;
  /** The certificate and key the actor's direct port presents, given when it asks over IPC (never in its environment). */
  directTls?: { cert: string; key: string };
}

/**
 * One actor child process. Spawned fresh with `child_process.spawn` (a CUDA context does not
 * survive fork), with an IPC channel that carries health pings and whose loss tells the actor its
 * agent is gone. A hung actor is killed with SIGKILL and its exit says why.
 */
export class ActorProcess {
  readonly actorId: string;
  readonly exited: Promise<ActorExit>;
  readonly #child: ChildProcess;
  readonly #health: ActorHealth;
  readonly #pinger: NodeJS.Timeout;
  #stderrTail = '';
  #killedBecause: string | undefined;

  constructor(options: ActorProcessOptions) {
    this.actorId = options.actorId;
    this.#health = new ActorHealth(options.health);
    this.#child = spawn(process.execPath, [...childNodeArgs(), options.entry ?? MODEL_ACTOR_ENTRY], {
      env: options.env,
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
      // A relayed link carries frames over IPC: structured clone passes their bytes as bytes, not JSON.
      ...(options.relay ? { serialization: 'advanced' as const } : {}),
    });
    this.#child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      this.#stderrTail = (this.#stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    const relay = options.relay;
    const directTls = options.directTls;
    this.#child.on('message', (message) => {
      const relayed = relay ? ActorToRelayIpcSchema.safeParse(message) : undefined;
      if (relayed?.success) relay!(relayed.data);
      else if (directTls && DirectTlsAskSchema.safeParse(message).success) {
        const answer: DirectTlsIpc = { type: 'directTls', ...directTls };
        if (this.#child.connected) this.#child.send(answer, () => {});
      } else this.#health.observe(message);
    });
    // An IPC write to an actor that just died must not crash the agent.
    this.#child.on('error', () => {});
    this.#pinger = setInterval(() => void this.#check(), options.health.intervalMs);
    this.exited = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => {
        clearInterval(this.#pinger);
        const exit: ActorExit = { code, signal, stderrTail: this.#stderrTail };
        if (this.#killedBecause) exit.killedBecause = this.#killedBecause;
        resolve(exit);
      });
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Tells the actor about its relayed link to the head; dropped once its IPC channel is gone. */
  toActor(message: RelayToActorIpc): void {
    if (this.#child.connected) this.#child.send(message, () => {});
  }

  /** SIGTERM (the actor finishes what it accepted), then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs: number): Promise<ActorExit> {
    if (this.running) {
      this.#child.kill('SIGTERM');
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }

  async #check(): Promise<void> {
    if (!this.running) return;
    this.#health.cpu((await processUsage(this.pid))?.cpuSeconds ?? null);
    if (!this.running) return;
    const hung = this.#health.verdict();
    if (hung) {
      this.#killedBecause = `killed by the agent: ${hung}`;
      this.#child.kill('SIGKILL');
      return;
    }
    if (this.#child.connected) this.#child.send(this.#health.ping(), () => {});
  }
}
