import { execFile } from 'node:child_process';

const DEFAULT_GRACE_MS = 1000;

export interface RunToolOptions {
  timeoutMs: number;
  /** Sent at the timeout. SIGKILL by default: a wedged nvidia-smi may ignore SIGTERM. */
  killSignal?: NodeJS.Signals;
  /** How long after the kill to wait for the child to actually exit before giving up on it. */
  graceMs?: number;
}

/**
 * Runs a read-only diagnostic tool (nvidia-smi) and returns its stdout.
 *
 * - execFile, never a shell: the command and its arguments are passed as-is, so nothing in
 *   them is ever interpreted.
 * - Resolves `null` when the binary does not exist (ENOENT): a host without the NVIDIA
 *   driver is a normal CPU-only host, not an error.
 * - Every other failure rejects with an Error that says what happened and carries the
 *   tool's own explanation (stderr, or stdout when stderr is empty: nvidia-smi prints
 *   "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" there).
 */
export function runTool(
  command: string,
  args: readonly string[],
  { timeoutMs, killSignal = 'SIGKILL', graceMs = DEFAULT_GRACE_MS }: RunToolOptions,
): Promise<string | null> {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    return Promise.reject(new RangeError(`timeoutMs must be a positive number, got ${timeoutMs}`));
  }
  const display = [command, ...args].join(' ');
  return new Promise((resolve, reject) => {
    let settled = false;
    const child = execFile(
      command,
      args,
      { encoding: 'utf8', timeout: timeoutMs, killSignal, windowsHide: true },
      (error, stdout, stderr) => {
        if (settled) return;
        settled = true;
        clearTimeout(backstop);
        if (error?.code === 'ENOENT') {
          resolve(null);
        } else if (error?.killed || child.killed) {
          // child.killed too: a child that shrugs off the signal and exits 0 later must not
          // pass off the output it managed to write before its pipes were closed as complete.
          reject(new Error(`${display} timed out after ${timeoutMs} ms`));
        } else if (!error) {
          resolve(stdout);
        } else if (typeof error.code === 'number') {
          reject(new Error(`${display} exited with code ${error.code}: ${toolOutput(stdout, stderr)}`));
        } else if (error.signal) {
          reject(new Error(`${display} was killed by ${error.signal}: ${toolOutput(stdout, stderr)}`));
        } else {
          reject(new Error(`failed to run ${display}: ${error.message}`));
        }
      },
    );
    // At the timeout execFile closes the pipes and signals the child, but it only calls back
    // once the child has exited. A process stuck in the kernel (a hung driver leaves
    // nvidia-smi in uninterruptible sleep) survives even SIGKILL, so the callback may never
    // come. This backstop bounds the wait regardless and stops the child holding the
    // agent's event loop open.
    const backstop = setTimeout(() => {
      if (settled) return;
      settled = true;
      child.stdout?.destroy();
      child.stderr?.destroy();
      child.unref();
      reject(new Error(`${display} timed out after ${timeoutMs} ms and did not exit`));
    }, timeoutMs + graceMs);
  });
}

/** The tool's explanation of a failure: nvidia-smi writes some of its errors to stdout. */
function toolOutput(stdout: string, stderr: string): string {
  return excerpt(stderr) || excerpt(stdout) || '(no output)';
}

/** Keeps error messages readable when a tool dumps a lot of output. */
function excerpt(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > 2000 ? `${trimmed.slice(0, 2000)}…` : trimmed;
}
