// The longest stretches of a V8 CPU profile without an `(idle)` sample: how long the profiled
// process held its event loop at once (a stall), and when, in seconds after the profile began.
// `node dist/bench/scale/profile-stalls.js FILE.cpuprofile [N]`. On a loaded machine a stretch also
// counts the time the process waited for a core. For bench/scale/HISTORY.md.
import { readFileSync } from 'node:fs';

interface Profile {
  nodes: { id: number; callFrame: { functionName: string } }[];
  samples: number[];
  timeDeltas: number[];
}

const [file, top = '6'] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-stalls FILE.cpuprofile [N]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
const stretches: { ms: number; atS: number }[] = [];
let atMs = 0;
let since: number | null = null;
profile.samples.forEach((id, i) => {
  atMs += (profile.timeDeltas[i] ?? 0) / 1000;
  if (!idle.has(id)) since ??= atMs;
  else if (since !== null) {
    stretches.push({ ms: atMs - since, atS: since / 1000 });
    since = null;
  }
});
stretches.sort((a, b) => b.ms - a.ms);
for (const s of stretches.slice(0, Number(top))) process.stdout.write(`${Math.round(s.ms)} ms at ${s.atS.toFixed(1)} s\n`);
