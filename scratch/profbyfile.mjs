import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map(); let total = 0;
for (let i = 0; i < p.samples.length; i++) { const n = byId.get(p.samples[i]); const u = n.callFrame.url; const k = u.includes('node_modules/') ? u.split('node_modules/')[1].split('/')[0] : u ? u.split('/').slice(-2).join('/') : n.callFrame.functionName; self.set(k, (self.get(k) ?? 0) + (p.timeDeltas[i] ?? 0)); total += p.timeDeltas[i] ?? 0; }
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log((v / total * 100).toFixed(2) + '%', k);
