// The functions a V8 CPU profile (node --cpu-prof, or bench:scale --head-cpu-prof) spent most
// self time in: `node dist/bench/scale/profile-top.js FILE.cpuprofile [N] [FROM_S TO_S]`, the last two
// keeping only the samples taken that many seconds after the profile began. For bench/scale/HISTORY.md.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, top = '15', from = '0', to = 'Infinity'] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-top FILE.cpuprofile [N] [FROM_S TO_S]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfMs = new Map<string, number>();
let totalMs = 0;
let atMs = 0;
profile.samples.forEach((id, i) => {
  const ms = (profile.timeDeltas[i] ?? 0) / 1000;
  atMs += ms;
  if (atMs < Number(from) * 1000 || atMs > Number(to) * 1000) return;
  const frame = byId.get(id)?.callFrame;
  const where = frame?.url ? `${relative(process.cwd(), frame.url.replace(/^file:\/\//, ''))}:${frame.lineNumber + 1}` : '';
  const key = `${frame?.functionName || '(anonymous)'} ${where}`.trim();
  selfMs.set(key, (selfMs.get(key) ?? 0) + ms);
  totalMs += ms;
});
process.stdout.write(`| self ms | % | function |\n|---:|---:|---|\n`);
for (const [key, ms] of [...selfMs].sort((a, b) => b[1] - a[1]).slice(0, Number(top)))
  process.stdout.write(`| ${Math.round(ms)} | ${((ms / totalMs) * 100).toFixed(1)} | \`${key}\` |\n`);
