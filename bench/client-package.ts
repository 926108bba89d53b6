// The client package as an application gets it: `npm run bench:client` (after a build) packs
// @troupe/client, installs it into a new folder offline (test/helpers/packages.ts, as the test
// does), and measures what the issue asked of it: node_modules' size and the time to import it,
// in REPEAT fresh node processes (default 15), wall and CPU, medians and least; beside them the same for
// 'troupe' from this build (the server package's entry, which re-exports the client). Markdown
// on stdout, for bench/RESULTS-client.md.
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGES, REPO_ROOT, importTimes, installOffline, pack, treeBytes } from '../test/helpers/packages.js';
import { systemLine } from './lib/system.js';
import { median } from './lib/report.js';

const REPEAT = Number(process.env.REPEAT ?? 15);

/** Median and least wall and CPU ms of importing `specifier` from `cwd` in REPEAT new processes. */
async function importCost(cwd: string, specifier: string) {
  const times = await importTimes(cwd, specifier, REPEAT);
  const walls = times.map((t) => t.wall);
  const cpus = times.map((t) => t.cpu);
  return { wall: median(walls), cpu: median(cpus), leastWall: Math.min(...walls), leastCpu: Math.min(...cpus) };
}

const row = (c: Awaited<ReturnType<typeof importCost>>) => [c.wall, c.cpu, c.leastWall, c.leastCpu].map((ms) => ms.toFixed(1)).join(' | ');

const loadBefore = loadavg()[0]!;
const work = await mkdtemp(join(tmpdir(), 'troupe-bench-client-'));
try {
  const app = join(work, 'app');
  const logs = join(work, 'npm-logs');
  const packed = await pack(PACKAGES.find((p) => p.name === '@troupe/client')!.dir, logs, work);
  await mkdir(app);
  await rename(join(work, packed.filename), join(app, packed.filename));
  await installOffline(app, packed.filename, logs);
  const bytes = await treeBytes(join(app, 'node_modules'));
  const client = await importCost(app, '@troupe/client');
  const server = await importCost(REPO_ROOT, 'troupe');
  const bare = await importCost(app, 'node:path');
  console.log(`## The client package: installed size and import time

${systemLine('bench:client', 'bench/client-package.ts')}
- load average (1 min) ${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after: other work on the machine raises the medians more than the least
- ${REPEAT} fresh processes each, median and least; import measured inside the process (wall, and CPU from process.cpuUsage), so node's own start is not in it; the test (client-package.test.ts) holds the least CPU of 5 under 50 ms

| what | ms wall, median | ms CPU, median | ms wall, least | ms CPU, least |
| --- | ---: | ---: | ---: | ---: |
| \`import('@troupe/client')\` in a new application (node_modules ${(bytes / 1e6).toFixed(2)} MB, packed ${(packed.size / 1e3).toFixed(0)} kB) | ${row(client)} |
| \`import('troupe')\` in this repository (the server package's entry: the same client) | ${row(server)} |
| \`import('node:path')\`, for scale | ${row(bare)} |
`);
} finally {
  await rm(work, { recursive: true, force: true });
}
