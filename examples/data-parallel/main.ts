/**
 * `npm run example:data-parallel [-- ROWS [REPLICAS [CHUNK]]]`: scores a large batch across
 * replicas and prints rows/s, beside the same batch sent to one replica in one call.
 */
import { availableParallelism } from 'node:os';
import { tensor } from '../../runtime/index.js';
import { runExample } from '../local-cluster.js';
import { score, writeScorer } from './score.js';

const rows = Number(process.argv[2] ?? 32_768);
const replicas = Number(process.argv[3] ?? Math.max(2, availableParallelism()));
const chunk = Number(process.argv[4] ?? 1024);

await runExample({}, async ({ client, modelDir }) => {
  await writeScorer(modelDir);
  const x = new Float32Array(rows * 64);
  for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 0.013);
  const result = await score(client, tensor('float32', [rows, 64], x), { replicas, chunk });
  const best = [...(result.scores.data as Float32Array).subarray(0, 10)];
  process.stdout.write(`scored ${rows} rows in chunks of ${chunk} on ${replicas} replicas (${availableParallelism()} cores)\n`);
  process.stdout.write(`row 0 scores: [${best.map((v) => v.toFixed(3)).join(', ')}]\n`);
  process.stdout.write(`dataParallel: ${Math.round(result.rowsPerSecond).toLocaleString('en-US')} rows/s\n`);
  process.stdout.write(
    `one call, one replica: ${Math.round(result.oneCallRowsPerSecond).toLocaleString('en-US')} rows/s (x${(result.rowsPerSecond / result.oneCallRowsPerSecond).toFixed(2)})\n`,
  );
});
