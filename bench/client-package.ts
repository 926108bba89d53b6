// The client package as an application gets it: `npm run bench:client` (after a build) packs
// @troupe/client, installs it into a new folder offline (test/helpers/packages.ts, as the test
// does), and measures what the issue asked of it: node_modules' size and the time to import it,
// in REPEAT fresh node processes (default 15), wall and CPU, medians; beside them the same for
// 'troupe' from this build (the server package's entry, which re-exports the client). Markdown
// on stdout, for bench/RESULTS-client.md.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGES, REPO_ROOT, installOffline, pack, treeBytes } from '../test/helpers/packages.js';
import { systemLine } from './lib/system.js';
import { median } from './lib/report.js';

const REPEAT = Number(process.env.REPEAT ?? 15);

/** A process that imports `specifier` and prints how long that took: wall ms, CPU ms. */
const IMPORT = `
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await import(process.argv[1]);
const { user, system } = process.cpuUsage(cpu0);
console.log(JSON.stringify([performance.now() - t0, (user + system) / 1000]));
`;

function importTimes(cwd: string, specifier: string): { wall: number; cpu: number } {
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < REPEAT; i++) {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', IMPORT, specifier], {
      cwd,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const [wall, cpu] = JSON.parse(out) as [number, number];
    walls.push(wall);
    cpus.push(cpu);
  }
  return { wall: median(walls), cpu: median(cpus) };
}

const work = await mkdtemp(join(tmpdir(), 'troupe-bench-client-'));
try {
  const app = join(work, 'app');
  const logs = join(work, 'npm-logs');
  const packed = await pack(PACKAGES.find((p) => p.name === '@troupe/client')!.dir, logs, work);
  await mkdir(app);
  await rename(join(work, packed.filename), join(app, packed.filename));
  await installOffline(app, packed.filename, logs);
  const bytes = await treeBytes(join(app, 'node_modules'));
  const client = importTimes(app, '@troupe/client');
  const server = importTimes(REPO_ROOT, 'troupe');
  const bare = importTimes(app, 'node:path');
  console.log(`## The client package: installed size and import time

${systemLine('bench:client', 'bench/client-package.ts')}
- ${REPEAT} fresh processes each, medians; import measured inside the process (wall, and CPU from process.cpuUsage), so node's own start is not in it

| what | ms wall | ms CPU |
| --- | ---: | ---: |
| \`import('@troupe/client')\` in a new application (node_modules ${(bytes / 1e6).toFixed(2)} MB, packed ${(packed.size / 1e3).toFixed(0)} kB) | ${client.wall.toFixed(1)} | ${client.cpu.toFixed(1)} |
| \`import('troupe')\` in this repository (the server package's entry: the same client) | ${server.wall.toFixed(1)} | ${server.cpu.toFixed(1)} |
| \`import('node:path')\`, for scale | ${bare.wall.toFixed(1)} | ${bare.cpu.toFixed(1)} |
`);
} finally {
  await rm(work, { recursive: true, force: true });
}
