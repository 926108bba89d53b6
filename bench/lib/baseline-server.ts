import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * Starts one of bench/baselines/ (`plain-http-server`: the session in the HTTP server's process;
 * `batched-http-server`: the same, batching as Troupe's replicas do;
 * `http-relay`: the session in a second process behind a WebSocket) on the MLP's input 'x' of 64
 * floats, one intra-op thread; resolves with its URL once it listens.
 */
export async function baselineServer(
  modelPath: string,
  baseline: 'plain-http-server' | 'batched-http-server' | 'http-relay',
): Promise<{ url: string; stop: () => void }> {
  const script = fileURLToPath(new URL(`../baselines/${baseline}.js`, import.meta.url));
  const child = spawn(process.execPath, [script, modelPath, 'x', '64', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (l) => l.startsWith('listening ') && resolve(l.slice(10)));
    child.once('exit', () => reject(new Error(`${baseline} exited`)));
  });
  return { url: `http://127.0.0.1:${port}/`, stop: () => child.kill('SIGTERM') };
}
