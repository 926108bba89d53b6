import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { childNodeArgs } from '../../runtime/internal.js';
import { isAlive } from './cluster.js';

/**
 * A small network of Linux network namespaces for tests that need real hosts with their own
 * addresses: one "switch" namespace holding a bridge, and one namespace per host, each joined to
 * the bridge by a veth pair (`eth0` in the host, `p-<host>` on the switch). Cutting a host's link
 * sets its switch port down, as pulling a cable would. Every namespace is named
 * `troupe-nl<pid>-<name>` after the test process, so a run that died without cleaning up is
 * recognised and removed by the next one. Traffic never leaves the namespaces made here: nothing
 * is routed to or from the namespace the test itself runs in. Needs root (CAP_NET_ADMIN) and
 * iproute2; {@link namespacesUnavailable} says why not when they are missing.
 */

const PREFIX = 'troupe-nl';

function ip(args: string[], timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('ip', args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(' ')}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

/** Why network namespaces cannot be made here, or undefined when they can. */
export async function namespacesUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `network namespaces are Linux-only (this is ${process.platform})`;
  try {
    await ip(['-V']);
  } catch (err) {
    return `iproute2's 'ip' is not available: ${(err as Error).message}`;
  }
  const probe = `${PREFIX}${process.pid}-probe`;
  try {
    await ip(['netns', 'add', probe]);
  } catch (err) {
    return `'ip netns add' failed (this needs root or CAP_NET_ADMIN): ${(err as Error).message}`;
  }
  try {
    await ip(['-n', probe, 'link', 'add', 'br0', 'type', 'bridge']);
    await ip(['-n', probe, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1']);
    await ip(['netns', 'exec', probe, process.execPath, '-e', '']);
    return undefined;
  } catch (err) {
    return `bridges, veth pairs or processes inside a namespace cannot be made: ${(err as Error).message}`;
  } finally {
    await ip(['netns', 'del', probe]).catch(() => {});
  }
}

/** PIDs of the processes inside a namespace. */
async function pidsIn(ns: string): Promise<number[]> {
  const out = await ip(['netns', 'pids', ns]).catch(() => '');
  return out
    .split('\n')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** Kills what runs in a namespace (by pid) and deletes it. */
async function removeNamespace(ns: string): Promise<void> {
  for (const pid of await pidsIn(ns)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await ip(['netns', 'del', ns]).catch(() => {});
}

/** Namespaces left behind by earlier runs of these tests whose process is gone. */
async function removeStale(): Promise<void> {
  const list = await ip(['netns', 'list']).catch(() => '');
  for (const line of list.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const match = new RegExp(`^${PREFIX}(\\d+)-`).exec(name);
    if (match && !isAlive(Number(match[1]))) await removeNamespace(name);
  }
}

export interface NsProcess {
  process: ChildProcess;
  /** The first stdout line matching the pattern given to `start` (its first group, if any). */
  line: Promise<string>;
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** The last few KiB the process wrote to stderr. */
  stderr(): string;
}

export class NetLab {
  readonly #id = `${PREFIX}${process.pid}`;
  readonly #namespaces: string[] = [];
  readonly #processes: NsProcess[] = [];

  private constructor() {}

  /** A lab with a switch (a bridge in its own namespace), after removing stale labs. */
  static async create(): Promise<NetLab> {
    await removeStale();
    const lab = new NetLab();
    const sw = await lab.#namespace('sw');
    await ip(['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    await ip(['-n', sw, 'link', 'set', 'br0', 'up']);
    return lab;
  }

  /** The namespace of a host. */
  ns(host: string): string {
    return `${this.#id}-${host}`;
  }

  async #namespace(name: string): Promise<string> {
    const ns = this.ns(name);
    await ip(['netns', 'add', ns]);
    this.#namespaces.push(ns);
    await ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /** A host on the switch with `address` (a /24) on its eth0. */
  async addHost(host: string, address: string): Promise<void> {
    const ns = await this.#namespace(host);
    const sw = this.ns('sw');
    const port = `p-${host}`.slice(0, 15);
    // Both ends are made where they belong: nothing appears in the test's own namespace.
    await ip(['-n', sw, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    await ip(['-n', sw, 'link', 'set', port, 'master', 'br0']);
    await ip(['-n', sw, 'link', 'set', port, 'up']);
    await ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
    await ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
  }

  /** A second address on a host's eth0 (the first one stays the source of its connections). */
  async addAddress(host: string, address: string): Promise<void> {
    await ip(['-n', this.ns(host), 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
  }

  /** Pulls the host's cable: its switch port goes down. */
  async cut(host: string): Promise<void> {
    await ip(['-n', this.ns('sw'), 'link', 'set', `p-${host}`.slice(0, 15), 'down']);
  }

  async restore(host: string): Promise<void> {
    await ip(['-n', this.ns('sw'), 'link', 'set', `p-${host}`.slice(0, 15), 'up']);
  }

  /**
   * Runs `node <script> ...args` inside a host's namespace (`ip netns exec` execs node, so the pid
   * is node's), with an IPC channel: if the test process dies, the child's channel closes and it
   * exits, as `troupe up` children do.
   */
  start(host: string, script: string, args: string[], pattern: RegExp, timeoutMs: number, env: NodeJS.ProcessEnv): NsProcess {
    const child = spawn('ip', ['netns', 'exec', this.ns(host), process.execPath, ...childNodeArgs(), script, ...args], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env,
    });
    let tail = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('utf8')).slice(-8192);
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const line = new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${host}: no line matching ${pattern} within ${timeoutMs} ms; stderr: ${tail}`)),
        timeoutMs,
      );
      createInterface({ input: child.stdout! }).on('line', (text) => {
        const match = pattern.exec(text);
        if (match) {
          clearTimeout(timer);
          resolve(match[1] ?? text);
        }
      });
      void exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(new Error(`${host}: exited (${signal ?? `code ${code}`}) before printing ${pattern}; stderr: ${tail}`));
      });
    });
    line.catch(() => {});
    const p: NsProcess = { process: child, line, exited, stderr: () => tail };
    this.#processes.push(p);
    return p;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  async stop(p: NsProcess, graceMs = 5000): Promise<void> {
    if (p.process.exitCode !== null || p.process.signalCode !== null) return;
    p.process.kill('SIGTERM');
    const timer = setTimeout(() => p.process.kill('SIGKILL'), graceMs);
    await p.exited;
    clearTimeout(timer);
  }

  /**
   * Stops every process started here (by pid), kills anything still inside the lab's namespaces
   * (actors the agents started), and deletes the namespaces. Safe to call after a failure.
   */
  async destroy(): Promise<void> {
    await Promise.all(this.#processes.map((p) => this.stop(p)));
    for (const ns of this.#namespaces.splice(0).reverse()) await removeNamespace(ns);
  }
}
