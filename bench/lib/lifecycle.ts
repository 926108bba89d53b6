import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { processUsage } from '../../node-agent/proc-stats.js';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import type { TestCluster } from '../../test/helpers/cluster.js';
import { closedLoop } from './load.js';
import { fmt } from './table.js';

/** Spawn-to-READY per model (deploy call to all replicas READY), and `troupe up` to first inference. */
export async function measureStartup(cluster: TestCluster, client: Cluster): Promise<string> {
  const lines = ['| what | seconds |', '| --- | ---: |'];
  for (const [name, model] of [
    ['startup-mlp', 'mlp.onnx'],
    ['startup-cnn', 'mobilenet.onnx'],
  ] as const) {
    const t = performance.now();
    await client.deploy({ name, model });
    lines.push(`| deploy ${model}: actor spawned, model loaded, warm-up run, READY | ${fmt((performance.now() - t) / 1000, 2)} |`);
    await client.undeploy(name);
  }
  lines.push(
    `| \`troupe up\`: head, agent, example models, deploy, first inference printed | ${fmt(await upToFirstInference(cluster), 2)} |`,
  );
  return lines.join('\n');
}

async function upToFirstInference(_cluster: TestCluster): Promise<number> {
  const cwd = await mkdtemp(join(tmpdir(), 'troupe-bench-up-'));
  const cli = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
  const start = performance.now();
  const up = spawn(process.execPath, [cli, 'up', '--port', '0'], {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, TROUPE_LOG_LEVEL: 'warn' },
  });
  try {
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('troupe up did not print an inference within 60 s')), 60_000);
      createInterface({ input: up.stdout }).on('line', (line) => {
        if (line.startsWith('sample inference')) {
          clearTimeout(timer);
          resolve((performance.now() - start) / 1000);
        }
      });
    });
  } finally {
    process.kill(-up.pid!, 'SIGTERM');
    await new Promise((r) => up.once('exit', r));
    await rm(cwd, { recursive: true, force: true });
  }
}

/**
 * RSS of head, agent and each actor, idle and in the middle of two load runs: SDK runs straight to
 * the replicas (the default, which leaves the head off the data path) and SDK runs through the
 * head (`direct: false`), so that "the head under load" is measured with load on the head.
 */
export async function measureMemory(cluster: TestCluster, client: Cluster): Promise<string> {
  await client.deploy({ name: 'mem-mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 32 } });
  await client.deploy({ name: 'mem-cnn', model: 'mobilenet.onnx', threads: 1 });
  const viaHead = await connect(cluster.url, { direct: false });
  const view = await client.describe();
  const actors = view.deployments.flatMap((d) => d.actors.filter((a) => a.pid !== null).map((a) => ({ name: a.name, pid: a.pid! })));
  const pids = [{ name: 'head', pid: cluster.head.process.pid! }, { name: 'agent', pid: cluster.agents[0]!.process.pid! }, ...actors];
  const sample = async () => Promise.all(pids.map(async (p) => (await processUsage(p.pid))?.rssBytes ?? NaN));
  const idle = await sample();
  const x = tensor('float32', [1, 64], new Float32Array(64).fill(0.1));
  /** RSS of every process 1.5 s into a 2 s run of 64 calls in flight from `from`. */
  const underLoad = async (from: Cluster) => {
    const load = closedLoop(() => from.run('mem-mlp', { x }), { concurrency: 64, seconds: 2, warmupSeconds: 0.5 });
    await new Promise((r) => setTimeout(r, 1500));
    const loaded = await sample();
    await load;
    return loaded;
  };
  const direct = await underLoad(client);
  const throughHead = await underLoad(viaHead);
  await viaHead.close();
  await client.undeploy('mem-mlp');
  await client.undeploy('mem-cnn');
  const mib = (b: number) => fmt(b / 2 ** 20, 1);
  const lines = [
    '\n| process | RSS idle (MiB) | RSS under load, SDK straight to the replicas (MiB) | RSS under load, SDK through the head (MiB) |',
    '| --- | ---: | ---: | ---: |',
  ];
  pids.forEach((p, i) => lines.push(`| ${p.name} | ${mib(idle[i]!)} | ${mib(direct[i]!)} | ${mib(throughHead[i]!)} |`));
  lines.push(
    '\n(load: 64 SDK calls in flight on mem-mlp, first straight to its replica (the default: the head is off the data path), then through the head (`direct: false`); mem-cnn idle throughout)',
  );
  return lines.join('\n');
}
