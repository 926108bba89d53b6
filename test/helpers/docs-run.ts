import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import ts from 'typescript';
import type { DocBlock } from './docs-blocks.js';
import { REPO } from './docs-blocks.js';
import { childEnv } from './env.js';
import { groupMembers } from './processes.js';

/**
 * Runs the docs' code blocks as a reader would: against a real `troupe up` started in a fresh
 * folder (its models under ./.troupe, as `npm start` writes them), from files in that folder.
 * `import … from 'troupe'` resolves through node_modules/troupe, a link to this repository (its
 * package.json `exports`, as an installed package); `troupe` on the PATH is dist/cli/main.js.
 * The cluster listens on a free port, not 8470 (tests run beside each other): each block's
 * `127.0.0.1:8470` and `localhost:8470` are rewritten to that port, and TROUPE_HEAD points the
 * CLI's default at it. curl runs with --fail-with-body (CURL_HOME/.curlrc), so an HTTP error fails
 * its block as it would catch a reader's eye.
 */
export interface DocsCluster {
  /** The folder troupe up and every block run in. */
  cwd: string;
  /** http://127.0.0.1:PORT, as troupe up printed it. */
  url: string;
  port: number;
  stop(): Promise<void>;
}

const CLI = join(REPO, 'dist/cli/main.js');
/** troupe up writes models, starts a head and an agent, deploys and runs the sample: on 2 busy cores. */
const UP_TIMEOUT_MS = 90_000;

export async function startTroupeUp(): Promise<DocsCluster> {
  const cwd = await mkdtemp(join(tmpdir(), 'troupe-docs-'));
  await mkdir(join(cwd, 'node_modules'));
  await symlink(REPO, join(cwd, 'node_modules', 'troupe'), 'dir');
  await mkdir(join(cwd, 'bin'));
  await symlink(CLI, join(cwd, 'bin', 'troupe'));
  await writeFile(join(cwd, '.curlrc'), 'fail-with-body\n');
  // detached: a process group of its own (up, head, agent, actors), stopped as a whole.
  // An IPC channel, as the other children of tests hold: if this test process dies without its
  // after() (killed, or its output cut short), `troupe up` sees the channel close and stops everything.
  const up = spawn(process.execPath, [CLI, 'up', '--port', '0'], {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: childEnv(),
  }) as ChildProcessByStdio<null, Readable, Readable>;
  let stdout = '';
  let stderr = '';
  up.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  up.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => up.once('exit', () => resolve()));
  const pgid = up.pid!;
  const stop = async () => {
    signalGroup(pgid, 'SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000).unref())]);
    for (const pid of await groupMembers(pgid)) signalGroup(pid, 'SIGKILL', false);
    await rm(cwd, { recursive: true, force: true });
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`troupe up printed no address in ${UP_TIMEOUT_MS} ms`)), UP_TIMEOUT_MS);
      const check = () => {
        const found = /Troupe is up at (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1];
        if (!found) return;
        clearTimeout(timer);
        resolve(found);
      };
      up.stdout.on('data', check);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error('troupe up exited before it was up'));
      });
    });
    return { cwd, url, port: Number(new URL(url).port), stop };
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`, { cause: err });
  }
}

/** Signals a process group (or one process); one that is already gone is no error. */
function signalGroup(pid: number, signal: NodeJS.Signals, group = true): void {
  try {
    process.kill(group ? -pid : pid, signal);
  } catch {
    // ESRCH: it exited meanwhile.
  }
}

/** The block's text with the docs' default address turned into the cluster's. */
export function withClusterAddress(code: string, port: number): string {
  return code.replace(/\b(127\.0\.0\.1|localhost):8470\b/g, `$1:${port}`);
}

/** Types stripped, as a reader's tsx or ts-node would; a syntax error fails the block here. */
function transpile(block: DocBlock, code: string): string {
  const out = ts.transpileModule(code, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
    fileName: 'block.ts',
  });
  const errors = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  if (errors.length) throw new Error(`${block.file}:${block.line}: does not compile: ${errors.join('; ')}`);
  return out.outputText;
}

/**
 * Runs one block in the cluster's folder and resolves with its output when it exits 0; rejects
 * with its exit and output otherwise, or after `timeoutMs` (its process group killed).
 */
export async function runBlock(cluster: DocsCluster, block: DocBlock, timeoutMs: number): Promise<string> {
  const code = withClusterAddress(block.code, cluster.port);
  const name = `${block.file.replace(/[^\w]+/g, '-')}-${block.line}`;
  let argv: string[];
  if (block.kind === 'sh') {
    const file = join(cluster.cwd, `${name}.sh`);
    await writeFile(file, `${code}\n`);
    argv = ['bash', '-e', '-o', 'pipefail', file];
  } else {
    const file = join(cluster.cwd, `${name}.mjs`);
    await writeFile(file, block.kind === 'ts' ? transpile(block, code) : code);
    argv = [process.execPath, file];
  }
  const env = childEnv({
    TROUPE_HEAD: cluster.url,
    PATH: `${join(cluster.cwd, 'bin')}:${process.env.PATH ?? ''}`,
    CURL_HOME: cluster.cwd,
    HOME: cluster.cwd,
  });
  const child = spawn(argv[0]!, argv.slice(1), { cwd: cluster.cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    signalGroup(child.pid!, 'SIGKILL');
  }, timeoutMs);
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once('close', (c, s) => resolve([c, s])),
  );
  clearTimeout(timer);
  if (status === 0) return output;
  const how = timedOut ? `did not finish in ${timeoutMs} ms` : `exited ${status ?? signal}`;
  throw new Error(`${block.file}:${block.line} (${block.lang}) ${how}\n--- block as run\n${code}\n--- output\n${output.slice(-6000)}`);
}
