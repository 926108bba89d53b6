// Quick look at the SDK path on the MLP (not the suite; see bench/run.ts).
import { connect, tensor } from '../runtime/index.js';
import { startCluster } from '../test/helpers/cluster.js';
import { closedLoop } from './lib/load.js';

const cluster = await startCluster({ agents: [['--name', 'bench', '--cpus', '16']] });
const client = await connect(cluster.url);
const batch = Number(process.env.BATCH ?? 1);
await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: batch } });
const x = tensor('float32', [1, 64], new Float32Array(64).fill(0.5));
for (const c of [1, 16, 64]) {
  const r = await closedLoop(() => client.run('mlp', { x }), { concurrency: c, seconds: Number(process.env.SECONDS ?? 3) });
  console.log(`c=${c} rps=${r.rps.toFixed(0)} p50=${r.p50Ms.toFixed(3)}ms p99=${r.p99Ms.toFixed(3)}ms errors=${r.errors}`);
}
await client.close();
await cluster.stop();
