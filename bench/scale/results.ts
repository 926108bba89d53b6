// Writes bench/RESULTS-scale.md: `npm run bench:scale-results` runs bench/scale/main.ts at the
// sizes docs/operations.md quotes, each in a process of its own (a run's sockets and simulated
// actors gone before the next starts), and tabulates their figures beside the targets of issue 27.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { report } from '../lib/report.js';
import { systemLine } from '../lib/system.js';
import { fmt } from '../lib/table.js';
import type { ScaleFigures } from './run-scale.js';

const run = promisify(execFile);

interface Size {
  label: string;
  args: string[];
}

/** Largest first, as a reader looks for it; the direct-links run shows what relaying the links saves. */
const SIZES: Size[] = [
  { label: '3,000 nodes, 20,000 actors', args: ['--nodes', '3000', '--deployments', '80', '--replicas', '250'] },
  {
    label: '3,000 nodes, 15,000 actors, links direct',
    args: ['--nodes', '3000', '--deployments', '60', '--replicas', '250', '--actor-links', 'direct'],
  },
  { label: '1,000 nodes, 7,000 actors', args: ['--nodes', '1000', '--deployments', '35', '--replicas', '200'] },
  { label: '100 nodes, 700 actors', args: ['--nodes', '100', '--deployments', '7', '--replicas', '100'] },
];
const COMMON = ['--gpus-per-node', '8', '--idle-s', '5', '--json'];
const MAIN = fileURLToPath(new URL('./main.js', import.meta.url));

async function measure(size: Size): Promise<{ figures: ScaleFigures; startedAt: string }> {
  const startedAt = new Date().toISOString().slice(11, 16);
  const { stdout } = await run(process.execPath, [MAIN, ...size.args, ...COMMON], { maxBuffer: 16 * 2 ** 20, timeout: 30 * 60_000 });
  const last = stdout.trim().split('\n').at(-1)!;
  return { figures: JSON.parse(last) as ScaleFigures, startedAt };
}

const s = (ms: number | null) => (ms === null ? 'n/a' : `${fmt(ms / 1000, ms < 1000 ? 3 : 2)} s`);
const bytes = (n: number | null, unit = 'B') => (n === null ? 'n/a' : `${n.toLocaleString('en-US')} ${unit}`);
const bound = (ms: number | null) => (ms === null ? 'n/a' : `≤ ${ms}`);

/** Each row: what is measured, its figure from one run, and the target where issue 27 set one. */
const ROWS: [string, (f: ScaleFigures) => string, string][] = [
  ['deploy calls to every actor READY (`deployToReadyMs`)', (f) => s(f.deployToReadyMs), '≤ 60 s'],
  ['placement p50 / p99 ms (bucket upper bounds)', (f) => `${bound(f.placementP50Ms)} / ${bound(f.placementP99Ms)}`, 'p99 ≤ 5 ms'],
  ['head RSS idle / peak during the deploy', (f) => `${f.headRssMb} / ${f.headDeployPeakRssMb} MB`, '≤ 1.5 GB'],
  ['head CPU idle (heartbeats only) / during the deploy, % of a core', (f) => `${f.headIdleCpuPct} / ${f.headDeployCpuPct}`, 'idle ≤ 20%'],
  [
    'one node dies: found dead after / every replacement READY after that',
    (f) => `${s(f.deathDetectedMs)} / ${s(f.replaceReadyMs)}`,
    '≤ 2 s after detection',
  ],
  [
    'bytes/s to one SDK client holding routes for one deployment, while a node dies',
    (f) => `${bytes(f.clientBytesPerS, 'B/s')}${f.watchedChanged ? ' (its deployment lost a replica)' : ' (its routes did not change)'}`,
    'does not grow with the cluster',
  ],
  [
    'status page: first load / feed while idle / feed while the node dies',
    (f) => `${bytes(f.statusFirstLoadBytes)} / ${bytes(f.statusBytesPerS, 'B/s')} / ${bytes(f.statusChurnBytesPerS, 'B/s')}`,
    '≤ 200 KB/s',
  ],
  ['status page: first paint in Chromium (playwright-core)', (f) => s(f.statusFirstPaintMs), '≤ 2 s'],
  ['head CPU while one page reads the feed, % of a core', (f) => String(f.headStatusCpuPct), ''],
  ['nodes joined (agents connected and registered)', (f) => s(f.joinMs), ''],
  ['actors READY counted by describe()', (f) => f.actors.toLocaleString('en-US'), ''],
];

const { say, lines } = report();
const load = loadavg().map((l) => l.toFixed(2));
const runs: { size: Size; figures: ScaleFigures; startedAt: string }[] = [];
for (const size of SIZES) {
  process.stderr.write(`bench:scale-results: ${size.label}...\n`);
  runs.push({ size, ...(await measure(size)) });
}

say('# The control plane at scale (issue 27)\n');
say(systemLine('bench:scale-results', 'bench/scale/results.ts'));
say(`- load average at the start (1 / 5 / 15 min): ${load.join(' / ')} (anything else running shares the cores)`);
say(
  `- each column one run of \`node dist/bench/scale/main.js ARGS ${COMMON.join(' ')}\` in a process of its own, one after another: a real head (\`troupe head --http-workers 0\`, its own process, its connection cap raised to fit), and N simulated node agents with their actors in the run's process, speaking the real agent and actor protocols over loopback (bench/scale/sim-*.ts); actor links relayed by their node's agent unless the column says direct; every replica asks for one GPU and one CPU; the idle and status windows 5 s each`,
);
say(
  '- placement quantiles are the upper bounds of `troupe_placement_duration_seconds` buckets; "found dead" is the agent-link liveness bound (`--dead-after-ms`) at work\n',
);
say(`| | ${runs.map((r) => `${r.size.label} (${r.startedAt})`).join(' | ')} | target |`);
say(`| --- | ${runs.map(() => '---').join(' | ')} | --- |`);
for (const [what, figure, target] of ROWS) say(`| ${what} | ${runs.map((r) => figure(r.figures)).join(' | ')} | ${target} |`);
say(`| arguments | ${runs.map((r) => `\`${r.size.args.join(' ')}\``).join(' | ')} | |`);
const errors = runs.filter((r) => r.figures.statusError);
if (errors.length > 0) say(`\nStatus page errors: ${errors.map((r) => `${r.size.label}: ${r.figures.statusError}`).join('; ')}.`);
say("\nEach run's whole figures (`--json`):\n");
for (const r of runs) say(`- ${r.size.label}: \`${JSON.stringify(r.figures)}\``);
await writeFile(new URL('../../../bench/RESULTS-scale.md', import.meta.url), `${lines.join('\n')}\n`);
