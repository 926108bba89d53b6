import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { TroupeError, childNodeArgs } from '../runtime/internal.js';

const CLI_ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

export interface Child {
  process: ChildProcess;
  /** Resolves with the first stdout line matching `pattern` (its first capture group). */
  line: Promise<string>;
  exited: Promise<void>;
}

/**
 * Starts `troupe <args>` as a child with an IPC channel: if this process dies, even by SIGKILL,
 * the channel closes and the child shuts down (see onShutdown), so nothing is orphaned.
 * `ownGroup`: the child (and what it starts) leaves this process group, so a terminal's Ctrl-C
 * reaches this process and not it: this process then stops it when it chooses.
 * `echo`: the child's stdout lines that match are this process's to print too (the rest are its
 * own business: this process prints what it has to say in its own words).
 */
export function startChild(
  args: string[],
  pattern: RegExp,
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
  { ownGroup = false, echo }: { ownGroup?: boolean; echo?: RegExp } = {},
): Child {
  const child = spawn(process.execPath, [...childNodeArgs(), CLI_ENTRY, ...args], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env,
    detached: ownGroup,
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const line = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`troupe ${args[0]} did not start within ${timeoutMs} ms`)), timeoutMs);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (text) => {
      if (echo?.test(text)) process.stdout.write(`${text}\n`);
      const match = pattern.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] ?? text);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      // Its own error is on the terminal already (stderr is shared): point there, not at a mystery,
      // and keep its kind: exit status 2 is a bad flag (cli/main.ts), the operator's to change.
      reject(
        new TroupeError(
          code === 2 ? 'TROUPE_ERR_BAD_FLAG' : 'TROUPE_ERR_INTERNAL',
          `troupe ${args[0]} exited (${signal ?? `code ${code}`}) before it was ready: its error is above`,
        ),
      );
    });
  });
  line.catch(() => {});
  return { process: child, line, exited };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the child has exited. */
export async function stopChild(child: Child, graceMs: number): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGTERM');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
}
