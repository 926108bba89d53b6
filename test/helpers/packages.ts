import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, readdir, lstat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { childEnv } from './env.js';

/** The repository's root (this file runs from dist/test/helpers/). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The packages this repository publishes: the server package (the root) and the client. */
export const PACKAGES = [
  { name: 'troupe', dir: REPO_ROOT },
  { name: '@troupe/client', dir: join(REPO_ROOT, 'packages', 'client') },
];

/** What `npm pack --json` says of one package. */
export interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string; size: number }[];
}

/** What a child npm keeps of the npm_* variables around it: where the cache and settings are. */
const NPM_KEPT = /^npm_config_(cache|userconfig|globalconfig|registry)$/i;

/**
 * Runs npm with `args` in `cwd`, bounded by `timeoutMs`, with no TROUPE_* setting and of the npm_*
 * variables an enclosing `npm test` sets only the cache and settings files (the others, such as
 * npm_config_local_prefix, would point a child npm at this repository), its logs in `logsDir` (not
 * the user's ~/.npm/_logs); resolves with its stdout, rejects with its stderr.
 */
export function npm(args: string[], cwd: string, logsDir: string, timeoutMs = 120_000): Promise<string> {
  const env = childEnv();
  for (const name of Object.keys(env)) if (/^npm_/i.test(name) && !NPM_KEPT.test(name)) delete env[name];
  return new Promise((resolve, reject) => {
    const child = spawn('npm', [...args, '--logs-dir', logsDir, '--no-audit', '--no-fund', '--no-update-notifier'], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0 ? resolve(stdout) : reject(new Error(`npm ${args.join(' ')} in ${cwd}: exit ${code ?? signal}\n${stderr}`)),
    );
  });
}

/**
 * `npm pack` of the package in `dir` (into `dest`, or with `--dry-run`), as it is built: install
 * scripts are not run, so the build is the one `npm test` made before it.
 */
export async function pack(dir: string, logsDir: string, dest?: string): Promise<PackResult> {
  const where = dest === undefined ? ['--dry-run'] : ['--pack-destination', dest];
  const out = await npm(['pack', '--json', '--ignore-scripts', ...where], dir, logsDir);
  return (JSON.parse(out) as PackResult[])[0]!;
}

/**
 * Installs the packed client (`tarball`, in `app`) into the new application folder `app` with no
 * network (`npm ci --offline`) and no install scripts: its dependencies come from npm's cache,
 * which this repository's own `npm ci` filled, at the versions its package-lock.json pins (the
 * application's lock is cut from it: the client's dependencies and theirs, nothing else).
 */
export async function installOffline(app: string, tarball: string, logsDir: string): Promise<void> {
  const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string; dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> }>;
  };
  const client = lock.packages['packages/client']!;
  const spec = `file:${tarball}`;
  const integrity = `sha512-${createHash('sha512')
    .update(await readFile(join(app, tarball)))
    .digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: 'app', dependencies: { '@troupe/client': spec } },
    'node_modules/@troupe/client': { version: client.version, resolved: spec, integrity, dependencies: client.dependencies },
  };
  const pending = Object.keys(client.dependencies ?? {});
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    const key = `node_modules/${name}`;
    if (key in packages) continue;
    const entry = lock.packages[key];
    if (!entry) throw new Error(`package-lock.json has no ${key}, which the client needs`);
    // The root lock marks what only its devDependencies need; in the application all is a dependency.
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...kept } = entry as Record<string, unknown>;
    packages[key] = kept;
    pending.push(...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.optionalDependencies ?? {}));
  }
  await writeFile(
    join(app, 'package.json'),
    JSON.stringify({ name: 'app', private: true, type: 'module', dependencies: { '@troupe/client': spec } }),
  );
  await writeFile(join(app, 'package-lock.json'), JSON.stringify({ name: 'app', lockfileVersion: 3, requires: true, packages }));
  await npm(['ci', '--offline', '--ignore-scripts'], app, logsDir);
}

/** The bytes of every file under `dir` (links counted as links, not followed). */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? await treeBytes(path) : (await lstat(path)).size;
  }
  return total;
}

/**
 * A new node process that imports `specifier` (resolved from `cwd`) and prints how long the import
 * took, measured inside it so that node's own start is not counted: wall ms, and CPU ms
 * (process.cpuUsage: all of the process's threads, so V8's compiler and GC threads too).
 */
const IMPORT = `
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await import(process.argv[1]);
const { user, system } = process.cpuUsage(cpu0);
console.log(JSON.stringify({ wall: performance.now() - t0, cpu: (user + system) / 1000 }));
`;

/** What importing `specifier` from `cwd` took in each of `runs` new processes, one after another. */
export async function importTimes(cwd: string, specifier: string, runs: number): Promise<{ wall: number; cpu: number }[]> {
  const times: { wall: number; cpu: number }[] = [];
  for (let i = 0; i < runs; i++) {
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--input-type=module', '-e', IMPORT, specifier],
        { cwd, env: childEnv(), encoding: 'utf8', timeout: 60_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`importing ${specifier} in ${cwd}: ${err.message}\n${stderr}`)) : resolve(stdout)),
      ),
    );
    times.push(JSON.parse(out) as { wall: number; cpu: number });
  }
  return times;
}
