import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The agent starts actors by file, not by import: node-agent/ must not depend on actors/.
const ACTOR_ENTRY = fileURLToPath(new URL('../actors/host.js', import.meta.url));

/** Keep this much of an actor's stderr to explain its death. */
const STDERR_TAIL_BYTES = 8192;

export interface ActorExit {
  code: number | null;
  signal: string | null;
  stderrTail: string;
}

export interface ActorProcessOptions {
  actorId: string;
  env: Record<string, string>;
}

/**
 * One actor child process. Spawned fresh with `child_process.spawn` (a CUDA context does not
 * survive fork), with an IPC channel whose loss tells the actor its agent is gone.
 */
export class ActorProcess {
  readonly actorId: string;
  readonly #child: ChildProcess;
  #stderrTail = '';
  readonly exited: Promise<ActorExit>;

  constructor(options: ActorProcessOptions) {
    this.actorId = options.actorId;
    this.#child = spawn(process.execPath, [ACTOR_ENTRY], {
      env: options.env,
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    this.#child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      this.#stderrTail = (this.#stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    // The IPC channel carries nothing yet; an error on it (actor gone) must not crash the agent.
    this.#child.on('error', () => {});
    this.exited = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => resolve({ code, signal, stderrTail: this.#stderrTail }));
    });
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs: number): Promise<ActorExit> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      this.#child.kill('SIGTERM');
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
      const exit = await this.exited;
      clearTimeout(timer);
      return exit;
    }
    return this.exited;
  }
}
