// Build step after tsc: compiles the Node-API addons in native/ into dist/native/:
// - troupe_shm.node: shared memory, so same-host clients hand large tensors to actors without
//   sending them through a socket (runtime/shm/);
// - troupe_handoff.node: passing a client's TCP connection from the head to a replica on its host,
//   which then serves that connection's HTTP requests itself (runtime/handoff/);
// - troupe_accept.node: the head's accept loop for its HTTP port, on a thread of its own, which
//   passes a connection to the event loop once its request head is whole (runtime/handoff/accept-addon.ts).
// Optional by design: with no C compiler, off Linux, or with TROUPE_BUILD_NATIVE=0, it says why
// in one line and the build goes on; tensors then travel in frames and front-door workers serve
// every connection. The Node-API headers come from the node-api-headers package, so no download
// and no node-gyp are needed, only `cc` (or $CC).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const ADDONS = [
  { source: 'troupe-shm.c', name: 'troupe_shm', without: 'tensors will travel in frames' },
  { source: 'troupe-handoff.c', name: 'troupe_handoff', without: 'front-door workers will serve every HTTP connection' },
  {
    source: 'troupe-accept.c',
    name: 'troupe_accept',
    without: "the head's event loop will accept its HTTP connections and wait for their first bytes itself",
    flags: ['-pthread'],
  },
];

// Every warning is an error: the addons handle descriptors and raw memory of other processes.
// test/unit/native-addons.test.ts builds the same sources with these flags and the sanitizers.
export const WARNINGS = ['-Wall', '-Wextra', '-Werror'];

// What an addon was last built from (compiler, flags, Node-API headers); with the source's time
// (and that of napi-helpers.h, which every addon includes),
// it decides whether a build is needed at all: an unchanged tree compiles nothing.
function upToDate(source, output, recipe) {
  const built = statSync(output, { throwIfNoEntry: false });
  const shared = join(dirname(source), 'napi-helpers.h');
  if (!built || built.mtimeMs < Math.max(statSync(source).mtimeMs, statSync(shared).mtimeMs)) return false;
  try {
    return readFileSync(`${output}.recipe`, 'utf8') === recipe;
  } catch {
    return false;
  }
}

function build(source, output, name, flags = []) {
  if (process.env.TROUPE_BUILD_NATIVE === '0') return 'TROUPE_BUILD_NATIVE=0';
  if (process.platform !== 'linux') return `these addons are Linux-only (this is ${process.platform})`;
  const headers = createRequire(import.meta.url)('node-api-headers').include_dir;
  const compiler = process.env.CC ?? 'cc';
  const args = ['-O2', ...WARNINGS, ...flags, '-shared', '-fPIC', `-DNODE_GYP_MODULE_NAME=${name}`, `-I${headers}`];
  const recipe = JSON.stringify([compiler, ...args]);
  if (upToDate(source, output, recipe)) return undefined;
  mkdirSync(dirname(output), { recursive: true });
  // Written aside and renamed, so a process loading the addon never sees half a file.
  const partial = `${output}.${process.pid}`;
  try {
    execFileSync(compiler, [...args, '-o', partial, source], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
  } catch (err) {
    rmSync(partial, { force: true });
    // The line that says what failed (gcc opens with 'In function …', which does not).
    const lines = err.stderr?.toString().trim().split('\n') ?? [];
    const stderr = lines.find((line) => /error/.test(line)) ?? lines[0];
    return `${compiler} failed: ${stderr || err.message.split('\n')[0]}`;
  }
  renameSync(partial, output);
  writeFileSync(`${output}.recipe`, recipe);
  return undefined;
}

// Imported by the addons' test for WARNINGS; run as a script, it builds.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const addon of ADDONS) {
    const output = join(root, 'dist', 'native', `${addon.name}.node`);
    const skipped = build(join(root, 'native', addon.source), output, addon.name, addon.flags);
    if (skipped) {
      rmSync(output, { force: true });
      rmSync(`${output}.recipe`, { force: true });
      process.stdout.write(`troupe: ${addon.name} addon not built (${skipped}); ${addon.without}\n`);
    }
  }
}
