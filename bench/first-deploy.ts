// What a user's first deploy gets, beside the layouts the docs advised before it was the default
// and the baselines (issues 43 and 40): `npm run bench:front-door` runs it after bench/front-door.ts;
// it alone writes bench/RESULTS-first-deploy.md. Every HTTP load comes from one Node client (undici,
// one connection per request in flight), timed with performance.now: latencies to the microsecond.
// MLP: the simplest Node HTTP server around one session, unbatched and batched (the same batching
// window as Troupe's, one process), and Troupe over HTTP OIP binary as first deployed (a model
// alone), with the defaults before issue 43 (front-door workers, no batching) and as the docs
// advised (--http-handoff, 2 replicas, batching 64). MobileNet: the same three Troupe layouts
// against raw onnxruntime-node's best layout, in alternating windows. Bounded: SECONDS per run (default 3).
import { writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { connect } from '../runtime/internal.js';
import type { ModelDeploymentInput } from '../runtime/internal.js';
import { startCluster } from '../test/helpers/cluster.js';
import type { TestCluster } from '../test/helpers/cluster.js';
import { baselineServer } from './lib/baseline-server.js';
import { bestLayoutFloor } from './lib/cnn-floor.js';
import { whenDoorsOpen } from './lib/doors.js';
import { h2load, h2loadAvailable } from './lib/h2load.js';
import { measureFloor } from './lib/floor.js';
import { oipRequest } from './lib/http-load.js';
import { closedLoop } from './lib/load.js';
import { rawHttpCaller } from './lib/raw-http-caller.js';
import type { LoadResult } from './lib/load.js';
import { median, medianLoad, report } from './lib/report.js';
import { systemLine } from './lib/system.js';
import { fmt } from './lib/table.js';

const SECONDS = Number(process.env.SECONDS ?? 3);
const WINDOWS = Number(process.env.WINDOWS ?? 3);
const { say, lines } = report();

type Request = { url: string; headers?: Record<string, string>; body: Buffer | string };

/** `concurrency` kept-alive connections, one request in flight on each, timed to the microsecond. */
async function load(request: Request, concurrency: number, seconds: number): Promise<LoadResult> {
  const url = new URL(request.url);
  const pool = new Pool(url.origin, { connections: concurrency, pipelining: 1 });
  const options = { path: url.pathname, method: 'POST' as const, headers: request.headers ?? {}, body: request.body };
  try {
    return await closedLoop(
      async () => {
        const answer = await pool.request(options);
        await answer.body.arrayBuffer();
        if (answer.statusCode !== 200) throw new Error(`HTTP ${answer.statusCode}`);
      },
      { concurrency, seconds },
    );
  } finally {
    await pool.close();
  }
}

/** One call in flight on a raw kept-alive socket (lib/raw-http-caller.ts): the client's own cost left out of the latency. */
async function rawLoad(request: Request, seconds: number): Promise<LoadResult> {
  const caller = await rawHttpCaller({ ...request, method: 'POST' });
  try {
    return await closedLoop(caller.call, { concurrency: 1, seconds });
  } finally {
    caller.close();
  }
}

/**
 * Deploys `spec` and, where replicas serve HTTP (`doors`: how many; 'every' for each replica it
 * runs, as many as the head chose at load), waits until each has taken a connection; then says
 * what describe() gives as the layout chosen, and why.
 */
async function deploy(cluster: TestCluster, spec: ModelDeploymentInput, doors: number | 'every' = 0, probe?: Request): Promise<string> {
  const client = await connect(cluster.url);
  try {
    const deployed = await client.update({ maxQueue: 100_000, ...spec });
    const open = doors === 'every' ? deployed.actors.length : doors;
    if (open > 0 && probe) await whenDoorsOpen(cluster.url, spec.name, open, { headers: probe.headers ?? {}, body: probe.body });
    const view = (await client.describe()).deployments.find((d) => d.name === spec.name);
    return view?.layout ? `${view.layout.chosen} (${view.layout.reason})` : 'no layout reported';
  } finally {
    await client.close();
  }
}

const mlpX = new Float32Array(64).map((_, i) => Math.sin(i));
const image = new Float32Array(3 * 224 * 224).map((_, i) => Math.sin(i));
const mlpOip = (url: string, name = 'mlp') => oipRequest(`${url}/v2/models/${name}/infer`, 'x', [1, 64], mlpX, 'logits', true);
const cnnOip = (url: string) => oipRequest(`${url}/v2/models/cnn/infer`, 'image', [1, 3, 224, 224], image, 'logits', true);

interface Clusters {
  first: TestCluster;
  before: TestCluster;
  advised: TestCluster;
}

const LABELS = {
  first: 'Troupe, first deploy (a model alone, default head)',
  before: 'Troupe, the defaults before issue 43 (front-door workers, batching off)',
  advised: 'Troupe, as the docs advised (--http-handoff, 2 replicas x 1 thread; the MLP batching 64, MobileNet 1; no idle spin)',
};

/** `still`: the first deploy's layout with `idleSpinMs: 0`, in the same cluster: what the idle spin does alone. */
type MlpPath = 'plain' | 'batched' | keyof Clusters | 'still';

const MLP_LABELS: Record<MlpPath, string> = {
  plain: 'simplest Node HTTP server, one session, unbatched',
  batched: 'simplest Node HTTP server, one session, batching 64 (one process)',
  first: LABELS.first,
  still: 'Troupe, first deploy but idleSpinMs 0 (its replica sleeps when idle)',
  before: LABELS.before,
  advised: LABELS.advised,
};

/**
 * The MLP at 1 and 64 in flight on every path. At 64 the paths take turns in WINDOWS windows and
 * each ratio is the median of the ratios within a window: this machine's speed drifts between
 * minutes (the unbatched baseline alone moved by half between two runs), so a path measured a
 * minute after its baseline would carry the drift in its ratio.
 */
async function mlpSection(c: Clusters, models: TestCluster['models']): Promise<void> {
  say('\n## Small MLP over HTTP OIP binary (input [1,64] float32)\n');
  const floor = await measureFloor(models.mlp, { name: 'x', shape: (b) => [b, 64] }, 1, 2, 1);
  say(`Raw onnxruntime-node \`session.run\` in-process, batch 1, 1 thread: p50 ${fmt(floor.p50Ms, 4)} ms.\n`);
  const chosen = await deploy(c.first, { name: 'mlp', model: 'mlp.onnx' }, 'every', mlpOip(c.first.url));
  say(`First deploy's layout, as describe() gives it: ${chosen}.\n`);
  await deploy(c.first, { name: 'mlp-still', model: 'mlp.onnx', idleSpinMs: 0 }, 'every', mlpOip(c.first.url, 'mlp-still'));
  // The earlier layouts as they ran then: no replica spun while idle before the first deploy's did.
  await deploy(c.before, { name: 'mlp', model: 'mlp.onnx', threads: 1, batch: { maxSize: 1 }, idleSpinMs: 0 });
  await deploy(
    c.advised,
    { name: 'mlp', model: 'mlp.onnx', threads: 1, replicas: 2, batch: { maxSize: 64 }, idleSpinMs: 0 },
    2,
    mlpOip(c.advised.url),
  );
  const plain = await baselineServer(models.mlp, 'plain-http-server');
  const batched = await baselineServer(models.mlp, 'batched-http-server');
  const requests: Record<MlpPath, Request> = {
    plain: { url: plain.url, body: Buffer.from(mlpX.buffer) },
    batched: { url: batched.url, body: Buffer.from(mlpX.buffer) },
    first: mlpOip(c.first.url),
    still: mlpOip(c.first.url, 'mlp-still'),
    before: mlpOip(c.before.url),
    advised: mlpOip(c.advised.url),
  };
  const paths = Object.keys(MLP_LABELS) as MlpPath[];
  try {
    // At 1 in flight too the paths take turns, window by window: a single run each put one path's
    // p50 a minute from another's, and the drift between them was as large as the gap measured.
    const oneWindows: Map<MlpPath, { r: LoadResult; raw: LoadResult }>[] = [];
    for (let i = 0; i < WINDOWS; i++) {
      const got = new Map<MlpPath, { r: LoadResult; raw: LoadResult }>();
      for (const path of paths) got.set(path, { r: await load(requests[path], 1, SECONDS), raw: await rawLoad(requests[path], SECONDS) });
      oneWindows.push(got);
    }
    const one = new Map(
      paths.map((path) => [
        path,
        { r: medianLoad(oneWindows.map((w) => w.get(path)!.r)), raw: medianLoad(oneWindows.map((w) => w.get(path)!.raw)) },
      ]),
    );
    const windows: Map<MlpPath, LoadResult>[] = [];
    for (let i = 0; i < WINDOWS; i++) {
      const got = new Map<MlpPath, LoadResult>();
      for (const path of paths) got.set(path, await load(requests[path], 64, SECONDS));
      windows.push(got);
    }
    const ratio = (path: MlpPath, over: MlpPath, at: Map<MlpPath, LoadResult>) => at.get(path)!.rps / at.get(over)!.rps;
    const atOne = (path: MlpPath) => one.get(path)!.r;
    say(
      '| path | in flight | req/s | p50 ms | p99 ms | errors | vs simplest, unbatched | vs simplest, batched | p50 over raw session.run, ms: undici / raw socket |',
    );
    say('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const path of paths) {
      const { r, raw } = one.get(path)!;
      say(
        `| ${MLP_LABELS[path]} | 1 | ${fmt(r.rps)} | ${fmt(r.p50Ms, 3)} | ${fmt(r.p99Ms, 3)} | ${r.errors} | ${fmt(r.rps / atOne('plain').rps, 2)}x | ${fmt(r.rps / atOne('batched').rps, 2)}x | ${fmt(r.p50Ms - floor.p50Ms, 3)} / ${fmt(raw.p50Ms - floor.p50Ms, 3)}${raw.errors ? ` (${raw.errors} errors)` : ''} |`,
      );
    }
    for (const path of paths) {
      const of = (f: (r: LoadResult) => number) => median(windows.map((w) => f(w.get(path)!)));
      say(
        `| ${MLP_LABELS[path]} | 64 | ${fmt(of((r) => r.rps))} | ${fmt(
          of((r) => r.p50Ms),
          3,
        )} | ${fmt(
          of((r) => r.p99Ms),
          3,
        )} | ${windows.reduce((n, w) => n + w.get(path)!.errors, 0)} | ${fmt(median(windows.map((w) => ratio(path, 'plain', w))), 2)}x | ${fmt(median(windows.map((w) => ratio(path, 'batched', w))), 2)}x |  |`,
      );
    }
    say(
      `\nAt 1 and at 64 in flight the paths took turns in ${WINDOWS} windows of ${SECONDS} s each (at 1, each window runs the undici client, then the raw-socket one); each figure above is the median over the windows, at 64 each ratio the median of the ratios within a window. Requests/s by window (${paths.map((p) => MLP_LABELS[p]).join(' / ')}):\n`,
    );
    say(windows.map((w) => `- ${paths.map((p) => fmt(w.get(p)!.rps)).join(' / ')}`).join('\n'));
  } finally {
    plain.stop();
    batched.stop();
  }
  // Each cluster's agent offers this machine's cores: the MLP's replicas give them back for the CNN's.
  for (const cluster of [c.first, c.before, c.advised]) {
    const client = await connect(cluster.url);
    try {
      await client.undeploy('mlp');
      if (cluster === c.first) await client.undeploy('mlp-still');
    } finally {
      await client.close();
    }
  }
}

/**
 * Images are sent by h2load where it is installed, as bench/front-door.ts sends them: on two cores
 * a Node client's CPU for 588 KiB bodies comes out of the models' (docs/front-door.md), and more so
 * for one replica, whose process reads every connection. Else by the Node client above.
 */
const IMAGES_BY_H2LOAD = h2loadAvailable();
function imageLoad(request: Request): Promise<LoadResult> {
  if (!IMAGES_BY_H2LOAD) return load(request, 16, 2);
  return h2load({ url: request.url, body: Buffer.from(request.body), headers: request.headers ?? {}, http1: true }, 16, 2);
}

async function cnnSection(c: Clusters, models: TestCluster['models']): Promise<void> {
  say('\n## MobileNet-v2-shaped CNN over HTTP OIP binary (input [1,3,224,224], 588 KiB a request), 16 in flight\n');
  const chosen = await deploy(c.first, { name: 'cnn', model: 'mobilenet.onnx' }, 'every', cnnOip(c.first.url));
  say(`First deploy's layout, as describe() gives it: ${chosen}.\n`);
  await deploy(c.before, { name: 'cnn', model: 'mobilenet.onnx', replicas: 1, threads: 1, batch: { maxSize: 1 } });
  await deploy(
    c.advised,
    { name: 'cnn', model: 'mobilenet.onnx', threads: 1, replicas: 2, batch: { maxSize: 1 } },
    2,
    cnnOip(c.advised.url),
  );
  const ratios: Record<keyof Clusters, number[]> = { first: [], before: [], advised: [] };
  const windows: string[] = [];
  for (let i = 0; i < WINDOWS; i++) {
    const floor = (await bestLayoutFloor(models.mobilenet, 1, 2)).best;
    const got: string[] = [fmt(floor, 1)];
    for (const key of ['first', 'before', 'advised'] as const) {
      const r = await imageLoad(cnnOip(c[key].url));
      ratios[key].push(r.rps / floor);
      got.push(`${fmt(r.rps, 1)} (p50 ${fmt(r.p50Ms, 3)}, p99 ${fmt(r.p99Ms, 3)} ms)`);
    }
    windows.push(`- ${got.join(' / ')}`);
  }
  say(
    `Load: ${IMAGES_BY_H2LOAD ? 'h2load --h1 (C), one connection per image in flight' : 'the Node client above (h2load is not installed: `apt-get install -y nghttp2-client`)'}. Alternating windows of 2 s, samples/s: raw onnxruntime-node's best layout at batch 1 (1 process x 2 threads or 2 x 1) / ${LABELS.first} / ${LABELS.before} / ${LABELS.advised}:\n`,
  );
  say(windows.join('\n'));
  say(
    `\nMedians over the floor: first deploy ${fmt(median(ratios.first), 2)}x; the defaults before issue 43 ${fmt(median(ratios.before), 2)}x; as the docs advised ${fmt(median(ratios.advised), 2)}x.`,
  );
}

say('# First deploy against tuned layouts and fair baselines\n');
say(systemLine('bench:front-door', 'bench/first-deploy.ts'));
say(
  `- load average at the start (1 / 5 / 15 min): ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ')} (anything else running shares the cores)`,
);
say(
  `- SECONDS=${SECONDS}, WINDOWS=${WINDOWS}; load from one Node client (undici, a kept-alive connection per request in flight) in the same machine, latencies from performance.now (microseconds); three clusters up: default head, --no-http-handoff, --http-handoff`,
);
const first = await startCluster();
const before = await startCluster({ headArgs: ['--no-http-handoff'] });
const advised = await startCluster({ headArgs: ['--http-handoff'] });
try {
  await mlpSection({ first, before, advised }, first.models);
  await cnnSection({ first, before, advised }, first.models);
} finally {
  await Promise.all([first.stop(), before.stop(), advised.stop()]);
}
await writeFile(new URL('../../bench/RESULTS-first-deploy.md', import.meta.url), `${lines.join('\n')}\n`);
