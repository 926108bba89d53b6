import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ortBinaryDir } from '../../actors/cuda-provider-hint.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { rejectsWith } from '../helpers/graphs.js';
import { seededFloats } from '../helpers/tensors.js';

// What nvidia-smi printed on a real H200 host (test/fixtures/nvidia-smi/captured/), read from the source tree.
const CAPTURED = fileURLToPath(new URL('../../../test/fixtures/nvidia-smi/captured/', import.meta.url));

// With the CUDA provider installed, a GPU deploy would load (or fail for want of a GPU) instead of
// failing for want of the provider.
const providerInstalled = existsSync(join(ortBinaryDir(), 'libonnxruntime_providers_cuda.so'));

describe('a GPU host whose onnxruntime-node has no CUDA provider (the default install)', { timeout: 120_000 }, () => {
  let dir = '';
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-gpu-host-'));
    const smi = join(dir, 'nvidia-smi');
    await writeFile(
      smi,
      [
        '#!/bin/sh',
        'case "$1" in',
        `  --query-gpu=*) exec cat '${join(CAPTURED, 'query-gpu-1x-h200.csv')}' ;;`,
        `  *) exec cat '${join(CAPTURED, 'query-compute-apps-h200-idle.csv')}' ;;`,
        'esac',
      ].join('\n'),
    );
    await chmod(smi, 0o755);
    cluster = await startCluster({ agents: [['--nvidia-smi', smi]] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test(
    'the agent reports the real GPU, and a GPU deploy fails at once saying how to install the provider',
    { skip: providerInstalled && 'the CUDA provider is installed here' },
    async () => {
      const [node] = (await client.describe()).nodes;
      assert.deepEqual(
        node!.gpus.map((g) => [g.name, g.memoryTotalMiB, g.simulated]),
        [['NVIDIA H200', 143771, false]],
      );
      await rejectsWith(
        client.deploy({ name: 'on-gpu', model: 'mlp.onnx', gpus: 1 }),
        'TROUPE_ERR_MODEL_LOAD',
        /cannot load 'mlp\.onnx' with the cuda provider: .*no CUDA provider installed.*ONNXRUNTIME_NODE_INSTALL=cuda12/,
      );
      // The node stays usable for CPU actors: nothing of the failed deploy holds it.
      await client.deploy({ name: 'on-cpu', model: 'mlp.onnx', cpus: 0.5 });
      const { logits } = await client.run('on-cpu', { x: tensor('float32', [1, 64], seededFloats(64, 1)) });
      assert.deepEqual(logits!.shape, [1, 10]);
    },
  );
});
