import { readFileSync, readdirSync } from 'node:fs';
import { connect, tensor } from '../dist/runtime/index.js';
import { startCluster } from '../dist/test/helpers/cluster.js';
import { closedLoop } from '../dist/bench/lib/load.js';
const cluster = await startCluster({ agents: [['--name', 'bench', '--cpus', '64']] });
const shm = process.env.SHM !== '0';
const client = await connect(cluster.url, { sharedMemory: shm });
const maxSize = Number(process.env.MAXSIZE ?? 1);
await client.deploy({ name: 'cnn', model: 'mobilenet.onnx', threads: 1, replicas: 2, batch: { maxSize, maxDelayMs: 2 }, maxQueue: 100000 });
const x = tensor('float32', [1, 3, 224, 224], new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i)));
await closedLoop(() => client.run('cnn', { image: x }), { concurrency: 16, seconds: 2 });
const ticks = () => { const m = {}; const tasks = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).flatMap((pid) => { try { return readdirSync(`/proc/${pid}/task`).map((t) => `${pid}/task/${t}`); } catch { return []; } }); for (const pid of tasks) { try { const st = readFileSync(`/proc/${pid}/stat`, 'utf8'); const f = st.slice(st.lastIndexOf(')') + 2).split(' '); const cmd = readFileSync(`/proc/${pid.split('/')[0]}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 50) + ' ' + st.slice(st.indexOf('('), st.lastIndexOf(')') + 1); m[pid] = { cmd, t: Number(f[11]) + Number(f[12]), u: Number(f[11]), s: Number(f[12]) }; } catch {} } return m; };
const a = ticks(); const t0 = Date.now();
const r = await closedLoop(() => client.run('cnn', { image: x }), { concurrency: 16, seconds: 6 });
const b = ticks(); const dt = (Date.now() - t0) / 1000;
console.log('shm', shm, 'rps', r.rps.toFixed(1), 'tensors', client.sharedMemory.tensors);
for (const [pid, v] of Object.entries(b)) { const d = (v.t - (a[pid]?.t ?? 0)) / 100 / dt; if (d > 0.003) console.log(pid, (d * 100).toFixed(1) + '%', 'sys', ((v.s - (a[pid]?.s ?? 0)) / dt).toFixed(1) + '%', v.cmd); }
await client.close(); await cluster.stop();
