import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startChild, stopChild } from '../../cli/children.js';
import type { Child } from '../../cli/children.js';
import { writeExampleModels } from '../../models/index.js';
import type { ExampleModelPaths } from '../../models/index.js';
import { childEnv } from './env.js';

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The head's line on stdout: its URL, and its gRPC address when it serves one. */
const HEAD_LISTENING = /listening on (\S+(?: and gRPC on \S+)?)/;

function listening(line: string): [url: string, grpcAddress: string] {
  const [url = '', grpc = ''] = line.split(' and gRPC on ');
  return [url, grpc];
}

export interface TestCluster {
  url: string;
  /** host:port of the head's gRPC endpoint (a free port unless headArgs chose; '' with --no-grpc). */
  grpcAddress: string;
  head: Child;
  /** The head's --data-dir (a fresh temporary one unless headArgs named one). */
  dataDir: string;
  agents: Child[];
  modelDir: string;
  models: ExampleModelPaths;
  /** Starts one more agent; `headUrl` (default the head's own) is where it, and its actors, reach the head. */
  startAgent(args?: string[], headUrl?: string): Promise<Child>;
  /**
   * Stops the head (SIGKILL, or SIGTERM for a graceful drain) and starts a new one with the same
   * flags, port and data directory; resolves once it listens. `head` is the new one after.
   * `whileDown` runs between the two (say, to kill an actor while no head watches).
   */
  restartHead(signal?: 'SIGKILL' | 'SIGTERM', whileDown?: () => Promise<void>): Promise<Child>;
  stop(): Promise<void>;
}

/**
 * A real head and real agents, each its own process on loopback with port 0, plus the example
 * models in a temporary directory. Children hold an IPC channel to this test process, so even a
 * crashed test run leaves nothing behind; `stop` ends them by pid.
 */
export async function startCluster(
  options: { agents?: string[][]; headArgs?: string[]; env?: NodeJS.ProcessEnv } = {},
): Promise<TestCluster> {
  const modelDir = await mkdtemp(join(tmpdir(), 'troupe-test-'));
  const models = await writeExampleModels(modelDir);
  const env = childEnv(options.env);
  // Each cluster keeps its durable state in its own folder: tests must never see each other's.
  const headArgs = options.headArgs ?? [];
  const dataDir = headArgs.includes('--data-dir') ? [] : ['--data-dir', join(modelDir, '.head')];
  // Every head of the suite serves gRPC on a free port (as --port 0 implies), restarted ones too.
  const grpcArgs = headArgs.includes('--grpc-port') || headArgs.includes('--no-grpc') ? [] : ['--grpc-port', '0'];
  let head = startChild(['head', '--port', '0', ...grpcArgs, ...dataDir, ...headArgs], HEAD_LISTENING, 20_000, env);
  const [url, grpcAddress] = listening(await head.line);
  const agents: Child[] = [];
  const startAgent = async (args: string[] = [], headUrl = url) => {
    const stateDir = args.includes('--state-dir') ? [] : ['--state-dir', join(modelDir, `.agent-${agents.length}`)];
    const agent = startChild(['agent', '--head', headUrl, '--model-dir', modelDir, ...stateDir, ...args], /joined/, 20_000, env);
    agents.push(agent);
    await agent.line;
    return agent;
  };
  for (const args of options.agents ?? [[]]) await startAgent(args);
  const named = headArgs.indexOf('--data-dir');
  const cluster: TestCluster = {
    url,
    grpcAddress,
    head,
    dataDir: named >= 0 ? headArgs[named + 1]! : join(modelDir, '.head'),
    agents,
    modelDir,
    models,
    startAgent,
    async restartHead(signal = 'SIGKILL', whileDown) {
      if (signal === 'SIGKILL') {
        head.process.kill('SIGKILL');
        await head.exited;
      } else await stopChild(head, 20_000);
      await whileDown?.();
      // Same port (listen reuses it at once), same data directory: agents and actors find it again.
      head = startChild(['head', '--port', new URL(url).port, ...grpcArgs, ...dataDir, ...headArgs], HEAD_LISTENING, 20_000, env);
      cluster.head = head;
      cluster.grpcAddress = listening(await head.line)[1];
      return head;
    },
    async stop() {
      await Promise.all(agents.map((a) => stopChild(a, 5000)));
      await stopChild(head, 5000);
      await rm(modelDir, { recursive: true, force: true });
    },
  };
  return cluster;
}
