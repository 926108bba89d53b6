// Build step after tsc: compiles native/troupe-shm.c, the shared-memory addon that lets same-host
// clients hand large tensors to actors without sending them through a socket (runtime/shm/), into
// dist/native/troupe_shm.node. Optional by design: with no C compiler, on a system without
// memfds (not Linux), or with TROUPE_BUILD_NATIVE=0, it says why in one line and the build goes
// on; every tensor then travels in its frame. The Node-API headers come from the node-api-headers
// package, so no download and no node-gyp are needed, only `cc` (or $CC).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'native', 'troupe-shm.c');
const output = join(root, 'dist', 'native', 'troupe_shm.node');
// What the addon was last built from (compiler, flags, Node-API headers); with the source's
// time, it decides whether a build is needed at all: an unchanged tree compiles nothing.
const recipeFile = `${output}.recipe`;

function upToDate(recipe) {
  const built = statSync(output, { throwIfNoEntry: false });
  if (!built || built.mtimeMs < statSync(source).mtimeMs) return false;
  try {
    return readFileSync(recipeFile, 'utf8') === recipe;
  } catch {
    return false;
  }
}

function build() {
  if (process.env.TROUPE_BUILD_NATIVE === '0') return 'TROUPE_BUILD_NATIVE=0';
  if (process.platform !== 'linux') return `memfds are Linux-only (this is ${process.platform})`;
  const headers = createRequire(import.meta.url)('node-api-headers').include_dir;
  const compiler = process.env.CC ?? 'cc';
  const args = ['-O2', '-Wall', '-shared', '-fPIC', '-DNODE_GYP_MODULE_NAME=troupe_shm', `-I${headers}`];
  const recipe = JSON.stringify([compiler, ...args]);
  if (upToDate(recipe)) return undefined;
  mkdirSync(dirname(output), { recursive: true });
  // Written aside and renamed, so a process loading the addon never sees half a file.
  const partial = `${output}.${process.pid}`;
  try {
    execFileSync(compiler, [...args, '-o', partial, source], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 60_000,
    });
  } catch (err) {
    rmSync(partial, { force: true });
    const stderr = err.stderr?.toString().trim().split('\n')[0];
    return `${compiler} failed: ${stderr || err.message.split('\n')[0]}`;
  }
  renameSync(partial, output);
  writeFileSync(recipeFile, recipe);
  return undefined;
}

const skipped = build();
if (skipped) {
  rmSync(output, { force: true });
  rmSync(recipeFile, { force: true });
  process.stdout.write(`troupe: shared-memory addon not built (${skipped}); tensors will travel in frames\n`);
}
