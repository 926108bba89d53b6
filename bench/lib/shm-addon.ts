import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** bench/experiments/shm.cc, loaded. */
export interface ShmAddon {
  /** An ArrayBuffer over the POSIX shared-memory region `name`, created at `bytes` if asked. */
  map(name: string, bytes: number, create: boolean): ArrayBuffer;
  unlink(name: string): void;
}

const SOURCE = fileURLToPath(new URL('../../../bench/experiments/shm.cc', import.meta.url));

/** Where Node's own headers are: next to the binary (official builds, nodesource), or the distro's. */
function nodeHeaders(): string | undefined {
  return [join(dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node'].find((d) => existsSync(join(d, 'node_api.h')));
}

/**
 * Compiles bench/experiments/shm.cc with the system's C++ compiler into the temp directory (once
 * per source version) and loads it. An experiment only: returns why it cannot, where there is no
 * compiler or no Node headers, instead of throwing.
 */
export function loadShmAddon(): ShmAddon | string {
  const headers = nodeHeaders();
  if (!headers) return "no Node headers (node_api.h) next to this Node or in /usr/include/node";
  const dir = join(tmpdir(), 'troupe-bench-shm');
  const output = join(dir, `shm-${Math.round(statSync(SOURCE).mtimeMs)}.node`);
  if (!existsSync(output)) {
    mkdirSync(dir, { recursive: true });
    try {
      execFileSync(process.env.CXX ?? 'g++', ['-O2', '-shared', '-fPIC', '-DNODE_GYP_MODULE_NAME=shm', `-I${headers}`, '-o', output, SOURCE], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      return `cannot compile ${SOURCE}: ${(err as Error).message.split('\n')[0]}`;
    }
  }
  return createRequire(import.meta.url)(output) as ShmAddon;
}
