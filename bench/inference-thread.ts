// The inference thread, before and after in the same run: `npm run bench:inference-thread`.
// Two sets of clusters side by side, one whose actors run every session on their main thread
// (TROUPE_INFERENCE_THREAD=never: the design before) and one in the default `auto` mode (MobileNet
// with 2 intra-op threads on an inference thread; with 1, and the MLP, on the main thread: the
// same as `never`), measured in alternating 2 s windows beside
// raw onnxruntime-node's best batch and layout (the floor). Paths: HTTP OIP binary through the
// front-door workers and with replicas serving HTTP (--http-handoff), at 16 and 64 in flight, and
// the SDK at 16; then the MLP over HTTP (handoff) and the SDK at 64 in flight, each mode against
// the other. Writes bench/RESULTS-inference-thread.md.
import { writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { connect, tensor } from '../runtime/internal.js';
import type { ModelDeploymentInput } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import type { TestCluster } from '../test/helpers/cluster.js';
import { LAYOUTS, bestLayoutFloor, layoutName } from './lib/cnn-floor.js';
import { httpLoad, oipRequest } from './lib/http-load.js';
import { closedLoop } from './lib/load.js';
import { whenDoorsOpen } from './lib/doors.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';
import { median, report } from './lib/report.js';

const WINDOWS = Number(process.env.WINDOWS ?? 3);
const SECONDS = 2;
const { say, lines: out } = report();

const image = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));
const mlpX = new Float32Array(64).map((_, i) => Math.sin(i));
const agents = [['--name', 'bench', '--cpus', '64']];
type Mode = 'never' | 'auto';
const MODES: Mode[] = ['never', 'auto'];

async function deploy(c: TestCluster, spec: ModelDeploymentInput): Promise<void> {
  const client = await connect(c.url);
  await client.update(spec).finally(() => client.close());
}

const clusters = new Map<Mode, { workers: TestCluster; handoff: TestCluster }>();
for (const mode of MODES) {
  const env = { TROUPE_INFERENCE_THREAD: mode };
  clusters.set(mode, {
    workers: await startCluster({ agents, env, headArgs: ['--no-http-handoff'] }),
    handoff: await startCluster({ agents, env, headArgs: ['--http-handoff'] }),
  });
}
try {
  say('# The inference thread, before (`never`) and after (`auto`) in the same run\n');
  say(systemLine('bench:inference-thread', 'bench/inference-thread.ts'));
  say(
    `- ${WINDOWS} alternating windows of ${SECONDS} s per path; load generator in the same machine; load average at the start ${loadavg()[0]!.toFixed(1)} (anything else running shares the cores)\n`,
  );
  say('## MobileNet-v2-shaped CNN, samples/s, median of the windows (ratio over the floor of each window)\n');
  const { models } = clusters.get('auto')!.workers;
  for (const layout of LAYOUTS) {
    const spec = {
      name: 'cnn',
      model: 'mobilenet.onnx',
      threads: layout.threads,
      replicas: layout.replicas,
      batch: { maxSize: 2 },
      maxQueue: 100_000,
    };
    const sdks = new Map<Mode, Awaited<ReturnType<typeof connect>>>();
    for (const mode of MODES) {
      const { workers, handoff } = clusters.get(mode)!;
      await deploy(workers, spec);
      await deploy(handoff, spec);
      await whenDoorsOpen(
        handoff.url,
        'cnn',
        layout.replicas,
        oipRequest(`${handoff.url}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], image, 'logits', true),
      );
      sdks.set(mode, await connect(workers.url));
    }
    const paths = ['HTTP workers 16', 'HTTP workers 64', 'HTTP handoff 16', 'HTTP handoff 64', 'SDK 16'];
    const ratios = new Map<string, number[]>();
    const rates = new Map<string, number[]>();
    const floors: number[] = [];
    const x = tensor('float32', [1, 3, 224, 224], image);
    for (let w = 0; w < WINDOWS; w++) {
      const floor = (await bestLayoutFloor(models.mobilenet, 2, SECONDS)).best;
      floors.push(floor);
      for (const mode of MODES) {
        const { workers, handoff } = clusters.get(mode)!;
        const req = (url: string) => oipRequest(`${url}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], image, 'logits', true);
        const results = [
          await httpLoad(req(workers.url), 16, SECONDS),
          await httpLoad(req(workers.url), 64, SECONDS),
          await httpLoad(req(handoff.url), 16, SECONDS),
          await httpLoad(req(handoff.url), 64, SECONDS),
          await closedLoop(() => sdks.get(mode)!.run('cnn', { image: x }), { concurrency: 16, seconds: SECONDS }),
        ];
        results.forEach((r, i) => {
          const key = `${mode} ${paths[i]}`;
          if (r.errors > 0) say(`  (window ${w + 1}: ${key} had ${r.errors} errors)`);
          ratios.set(key, [...(ratios.get(key) ?? []), r.rps / floor]);
          rates.set(key, [...(rates.get(key) ?? []), r.rps]);
        });
      }
    }
    for (const mode of MODES) {
      await sdks.get(mode)!.close();
      const { workers, handoff } = clusters.get(mode)!;
      for (const c of [workers, handoff]) {
        const client = await connect(c.url);
        await client.undeploy('cnn').finally(() => client.close());
      }
    }
    say(`### ${layoutName(layout)}, floor (best layout, batch 2) median ${fmt(median(floors), 1)} samples/s\n`);
    // auto's rule (actors/load-model.ts): a session of one intra-op thread stays on the main thread.
    if (layout.threads === 1)
      say(
        '`auto` keeps a session of one intra-op thread on the main thread, as `never` does: both columns run the same layout, and what differs between them is the drift between windows.\n',
      );
    say('| path | before (main thread) | after (inference thread) |');
    say('| --- | ---: | ---: |');
    for (const p of paths) {
      const cell = (mode: Mode) => `${fmt(median(rates.get(`${mode} ${p}`)!), 1)} (${fmt(median(ratios.get(`${mode} ${p}`)!), 2)}x)`;
      say(`| ${p} in flight | ${cell('never')} | ${cell('auto')} |`);
    }
    say('');
  }

  say('## Small MLP (stays on the main thread in `auto`: its run is under the threshold), req/s, median of the windows\n');
  const mlp = { name: 'mlp', model: 'mlp.onnx', threads: 1, replicas: 1, batch: { maxSize: 64 }, maxQueue: 100_000 };
  const sdks = new Map<Mode, Awaited<ReturnType<typeof connect>>>();
  for (const mode of MODES) {
    const { workers, handoff } = clusters.get(mode)!;
    await deploy(workers, mlp);
    await deploy(handoff, mlp);
    await whenDoorsOpen(handoff.url, 'mlp', 1, oipRequest(`${handoff.url}/v2/models/mlp/infer`, 'x', [1, 64], mlpX, 'logits', true));
    sdks.set(mode, await connect(workers.url));
  }
  const x = tensor('float32', [1, 64], mlpX);
  const mlpRates = new Map<string, number[]>();
  for (let w = 0; w < WINDOWS; w++) {
    for (const mode of MODES) {
      const { handoff } = clusters.get(mode)!;
      const results = [
        await httpLoad(oipRequest(`${handoff.url}/v2/models/mlp/infer`, 'x', [1, 64], mlpX, 'logits', true), 64, SECONDS),
        await closedLoop(() => sdks.get(mode)!.run('mlp', { x }), { concurrency: 64, seconds: SECONDS }),
      ];
      ['HTTP handoff 64', 'SDK 64'].forEach((p, i) =>
        mlpRates.set(`${mode} ${p}`, [...(mlpRates.get(`${mode} ${p}`) ?? []), results[i]!.rps]),
      );
    }
  }
  for (const mode of MODES) await sdks.get(mode)!.close();
  say('| path | before (main thread) | after (`auto`) |');
  say('| --- | ---: | ---: |');
  for (const p of ['HTTP handoff 64', 'SDK 64'])
    say(`| ${p} in flight | ${fmt(median(mlpRates.get(`never ${p}`)!))} | ${fmt(median(mlpRates.get(`auto ${p}`)!))} |`);
  say(`\nLoad average at the end: ${loadavg()[0]!.toFixed(1)}.`);
} finally {
  for (const { workers, handoff } of clusters.values()) {
    await workers.stop();
    await handoff.stop();
  }
}
await writeFile(new URL('../../bench/RESULTS-inference-thread.md', import.meta.url), `${out.join('\n')}\n`);
