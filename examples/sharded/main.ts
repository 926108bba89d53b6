/**
 * `npm run example:sharded`: a MobileNetV2-shaped model cut into two stages, each pinned to its
 * own (simulated) GPU, run as a pipeline; checks the output against the uncut model in-process.
 */
import ort from 'onnxruntime-node';
import { tensor } from '../../runtime/index.js';
import { disableOrtTelemetryByDefault } from '../../runtime/internal.js';
import { runExample } from '../local-cluster.js';
import { shardedGraph, writeShardedModels } from './stages.js';

// No telemetry from onnxruntime in this process (see runtime/ort-telemetry.ts).
disableOrtTelemetryByDefault();

await runExample({ simulateGpus: 2 }, async ({ client, modelDir }) => {
  const models = await writeShardedModels(modelDir);
  const view = await client.deploy(shardedGraph());
  for (const d of view.deployments) {
    const a = d.actors[0]!;
    process.stdout.write(`${d.name}: ${d.model} on ${a.node} ${a.device} (CUDA_VISIBLE_DEVICES=${a.visibleDevices}), pid ${a.pid}\n`);
  }
  process.stdout.write(`stage0 -> stage1 through '${models.boundary}'\n`);

  const image = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < image.length; i++) image[i] = Math.sin(i * 0.001) * Math.cos(i * 0.07);
  const input = tensor('float32', [1, 3, 224, 224], image);
  const { logits } = await client.run('sharded', { image: input });

  const session = await ort.InferenceSession.create(models.whole, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const whole = (await session.run({ image: new ort.Tensor('float32', image, [1, 3, 224, 224]) })).logits!.data as Float32Array;
  await session.release();
  const served = logits!.data as Float32Array;
  const differing = served.reduce((n, v, i) => n + (v === whole[i] ? 0 : 1), 0);
  const top = [...served.keys()].sort((a, b) => served[b]! - served[a]!).slice(0, 3);
  process.stdout.write(`logits ${logits!.dtype}[${logits!.shape.join(',')}], top classes ${top.join(', ')}\n`);
  process.stdout.write(
    `equals the uncut model in-process: ${differing === 0 ? 'yes, every element' : `no, ${differing} elements differ`}\n`,
  );
  if (differing > 0) process.exitCode = 1;
});
