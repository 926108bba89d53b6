// Troupe side by side with the systems users pick instead: `npm run bench:peers`. Ray Serve, KServe's
// ModelServer and BentoML each serve the same ONNX models (the MLP, the MobileNet-v2-shaped CNN, a
// two-step pipeline) with onnxruntime, configured as their docs advise for throughput on two cores
// (bench/peers/*.py), installed pinned into .venv-peers/ by bench/peers/install.sh; Troupe runs as a
// user first deploys it and as docs/performance.md advises. One system runs at a time, started and
// stopped here. Load: one generator for all (bench/lib/http-load.ts: undici at concurrency 1,
// autocannon above), and Triton's perf_analyzer where a system answers it (Open Inference Protocol
// with Triton's model configuration). Writes bench/RESULTS-peers.md. Bounded: each load run lasts
// SECONDS (default 3) after its warm-up; a system that does not answer within its bound is a row
// saying what failed. PEERS=troupe-first,troupe,kserve,ray,bentoml picks systems.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildMlp, writeExampleModels } from '../../models/index.js';
import { PERF_ANALYZER, clientsMissing, perfAnalyzer } from '../../test/helpers/python-clients.js';
import type { PerfAnalyzerRun } from '../../test/helpers/python-clients.js';
import { httpLoad, imageLoad, IMAGE_LOAD_GENERATOR } from '../lib/http-load.js';
import type { LoadResult } from '../lib/load.js';
import { treeRss } from '../lib/process-tree.js';
import { systemLine } from '../lib/system.js';
import { fmt } from '../lib/table.js';
import { BENTOML, KSERVE, RAY, TROUPE_ADVISED, TROUPE_FIRST, VENVS } from './systems.js';
import type { ModelFiles, Served, System } from './systems.js';

const SECONDS = Number(process.env.SECONDS ?? 3);
const ALL: Record<string, System> = { 'troupe-first': TROUPE_FIRST, troupe: TROUPE_ADVISED, kserve: KSERVE, ray: RAY, bentoml: BENTOML };
const CHOSEN = (process.env.PEERS ?? Object.keys(ALL).join(',')).split(',').map((key) => {
  const system = ALL[key];
  if (!system) throw new Error(`PEERS: unknown '${key}' (known: ${Object.keys(ALL).join(', ')})`);
  return system;
});

interface Figures {
  mlp1: LoadResult;
  mlp64: LoadResult;
  cnn16: LoadResult;
  pipe1?: LoadResult;
  pipe16?: LoadResult;
  pipeNone?: string;
  firstAnswerS: number;
  rssBytes: number;
  processes: number;
  /** The machine's 1-minute load average before and after this system's runs (other work shares it). */
  load: [number, number];
  perf?: { protocol: string; what: string; run: PerfAnalyzerRun | string }[];
}
type Outcome = { system: System; figures?: Figures; failed?: string };

/** perf_analyzer's shape flags for a model: its dynamic dims (-1) as 1, from Triton's model configuration. */
async function shapeArgs(http: string, name: string): Promise<string[]> {
  const answer = await fetch(`http://${http}/v2/models/${name}/config`);
  if (!answer.ok) return [];
  const config = (await answer.json()) as { input: { name: string; dims: number[] }[] };
  return config.input
    .filter((i) => i.dims.some((d) => d < 0))
    .flatMap((i) => ['--shape', `${i.name}:${i.dims.map((d) => (d < 0 ? 1 : d)).join(',')}`]);
}

async function perfRuns(served: Served, work: string): Promise<Figures['perf']> {
  if (!served.oip) return undefined;
  if (clientsMissing) return [{ protocol: '-', what: '-', run: clientsMissing }];
  const out: NonNullable<Figures['perf']> = [];
  const common = ['-x', '1', '-p', String(SECONDS * 1000), '-s', '1000', '--max-trials', '3'];
  for (const [protocol, url] of [
    ['http', served.oip.http],
    ['grpc', served.oip.grpc],
  ] as const) {
    for (const [what, name, concurrency] of [
      ['MLP', 'mlp', '1:64:63'],
      ['MobileNet', 'cnn', '16'],
    ] as const) {
      const args = [
        '-m',
        name,
        ...(await shapeArgs(served.oip.http, name)),
        '-u',
        url,
        '-i',
        protocol,
        '--concurrency-range',
        concurrency,
        ...common,
      ];
      const run = await perfAnalyzer(args, work, 180_000);
      out.push({
        protocol,
        what,
        run:
          run.status === 0 && run.errors.length === 0
            ? run
            : `perf_analyzer: ${run.errors.join(' ') || run.output.trim().split('\n').slice(-2).join(' ')}`,
      });
    }
  }
  return out;
}

async function measure(system: System, files: ModelFiles, work: string): Promise<Figures> {
  const loadBefore = loadavg()[0]!;
  const served = await system.start(files);
  try {
    const mlp1 = await httpLoad(served.mlp, 1, SECONDS);
    const mlp64 = await httpLoad(served.mlp, 64, SECONDS);
    // Memory in the middle of the image load: every process is up and holding its buffers. Twice
    // the window: a system that takes a second an image still answers a few in it.
    const cnnRun = imageLoad(served.cnn, 16, 2 * SECONDS);
    // Its failure is thrown where it is awaited below, after the wait: unhandled until then, it ended
    // the process before `finally` stopped the system (its servers were left running).
    cnnRun.catch(() => {});
    await new Promise((r) => setTimeout(r, 1000 + SECONDS * 1000));
    const rss = await treeRss(served.roots);
    const cnn16 = await cnnRun;
    const pipe = served.pipe;
    const pipes =
      typeof pipe === 'string'
        ? { pipeNone: pipe }
        : { pipe1: await httpLoad(pipe, 1, SECONDS), pipe16: await httpLoad(pipe, 16, SECONDS) };
    const perf = await perfRuns(served, work);
    return {
      mlp1,
      mlp64,
      cnn16,
      ...pipes,
      firstAnswerS: served.firstAnswerS,
      rssBytes: rss.bytes,
      processes: rss.processes,
      load: [loadBefore, loadavg()[0]!],
      ...(perf ? { perf } : {}),
    };
  } finally {
    await served.stop();
  }
}

/** A metric of the comparison: its value for a system, and whether more is better. */
interface Metric {
  label: string;
  unit: string;
  higherBetter: boolean;
  value: (f: Figures) => number | undefined;
  digits?: number;
}
const errorsOf = (r: LoadResult | undefined) => (r && r.errors > 0 ? ` (${r.errors} errors)` : '');
const METRICS: Metric[] = [
  { label: 'MLP, concurrency 1: p50', unit: 'ms', higherBetter: false, value: (f) => f.mlp1.p50Ms, digits: 3 },
  { label: 'MLP, concurrency 1: p99', unit: 'ms', higherBetter: false, value: (f) => f.mlp1.p99Ms, digits: 3 },
  { label: 'MLP, concurrency 64: throughput', unit: 'req/s', higherBetter: true, value: (f) => f.mlp64.rps },
  { label: 'MLP, concurrency 64: p99', unit: 'ms', higherBetter: false, value: (f) => f.mlp64.p99Ms, digits: 1 },
  { label: 'MobileNet, concurrency 16: throughput', unit: 'img/s', higherBetter: true, value: (f) => f.cnn16.rps, digits: 1 },
  { label: 'MobileNet, concurrency 16: p99', unit: 'ms', higherBetter: false, value: (f) => f.cnn16.p99Ms, digits: 1 },
  { label: 'two-step pipeline, concurrency 1: p50', unit: 'ms', higherBetter: false, value: (f) => f.pipe1?.p50Ms, digits: 3 },
  { label: 'two-step pipeline, concurrency 16: throughput', unit: 'req/s', higherBetter: true, value: (f) => f.pipe16?.rps },
  { label: 'deploy to first answer', unit: 's', higherBetter: false, value: (f) => f.firstAnswerS, digits: 2 },
  { label: 'memory, all processes (RSS, under load)', unit: 'MiB', higherBetter: false, value: (f) => f.rssBytes / 2 ** 20 },
];

/** What `perf_analyzer --version` prints (on stderr). */
function perfAnalyzerVersion(): string {
  const lib = join(PERF_ANALYZER, '..', '..', 'nvidia', 'cuda_runtime', 'lib');
  const run = spawnSync(PERF_ANALYZER, ['--version'], { encoding: 'utf8', env: { ...process.env, LD_LIBRARY_PATH: lib } });
  return `${run.stdout}${run.stderr}`.trim();
}

function versions(): string[] {
  const lines: string[] = [];
  for (const [venv, packages] of [
    ['ray', ['ray', 'onnxruntime']],
    ['kserve', ['kserve', 'onnxruntime']],
    ['bentoml', ['bentoml', 'onnxruntime']],
  ] as const) {
    const python = join(VENVS, venv, 'bin', 'python');
    if (!existsSync(python)) continue;
    const code = `import importlib.metadata as m, sys; print(', '.join(p + ' ' + m.version(p) for p in sys.argv[1:]) + ', Python ' + sys.version.split()[0])`;
    lines.push(`- ${venv}: ${execFileSync(python, ['-c', code, ...packages], { encoding: 'utf8' }).trim()}`);
  }
  if (existsSync(PERF_ANALYZER)) lines.push(`- perf_analyzer: ${perfAnalyzerVersion()}`);
  return lines;
}

function report(outcomes: Outcome[], started: Date): string {
  const out: string[] = ['# Troupe beside Ray Serve, KServe and BentoML', ''];
  out.push(systemLine('bench:peers', 'bench/peers/main.ts'), ...versions());
  out.push(
    `- run: \`npm run bench:peers\`, ${started.toISOString()} to ${new Date().toISOString()}; each load ${SECONDS} s closed loop after an unmeasured warm-up, from the same machine (the load generator shares the two cores); one system at a time`,
    `- load: one generator for every system (undici at concurrency 1, autocannon above; images: ${IMAGE_LOAD_GENERATOR}); each system gets its own request form for one row (Troupe and KServe: Open Inference Protocol with binary tensors; Ray Serve: the tensor's raw bytes; BentoML: its JSON IO)`,
    '',
    '## Configurations',
    '',
  );
  for (const { system } of outcomes) out.push(`- **${system.name}**: ${system.config}`);
  const advised = outcomes.find((o) => o.system === TROUPE_ADVISED)?.figures;
  out.push('', '## Side by side', '');
  out.push(
    'Each cell: the figure, then Troupe (as docs/performance.md advises) over the peer, oriented so that above 1.00x means Troupe is ahead (throughput: Troupe / peer; latency, time and memory: peer / Troupe).',
    '',
  );
  out.push(`| metric | ${outcomes.map((o) => o.system.name).join(' | ')} |`, `| --- | ${outcomes.map(() => '---:').join(' | ')} |`);
  const behind: string[] = [];
  for (const metric of METRICS) {
    const cells = outcomes.map((o) => {
      if (!o.figures) return 'failed';
      const value = metric.value(o.figures);
      if (metric.label.startsWith('MobileNet') && o.figures.cnn16.requests === 0)
        return `none answered in ${fmt(o.figures.cnn16.seconds, 1)} s`;
      if (value === undefined) return o.figures.pipeNone ? `none (${o.figures.pipeNone})` : 'none';
      const troupe = advised ? metric.value(advised) : undefined;
      const ratio = troupe === undefined || o.system === TROUPE_ADVISED ? undefined : metric.higherBetter ? troupe / value : value / troupe;
      if (ratio !== undefined && Number.isFinite(ratio) && ratio < 1 && o.system !== TROUPE_FIRST)
        behind.push(`${metric.label}: ${o.system.name} ${fmt(1 / ratio, 2)}x Troupe's`);
      const extra = metric.label.startsWith('MLP, concurrency 64')
        ? errorsOf(o.figures.mlp64)
        : metric.label.startsWith('MobileNet')
          ? errorsOf(o.figures.cnn16)
          : '';
      return `${fmt(value, metric.digits ?? 0)} ${metric.unit}${ratio === undefined ? '' : ` (${fmt(ratio, 2)}x)`}${extra}`;
    });
    out.push(`| ${metric.label} | ${cells.join(' | ')} |`);
  }
  out.push(`| processes | ${outcomes.map((o) => (o.figures ? String(o.figures.processes) : 'failed')).join(' | ')} |`);
  out.push(
    `| load average (1 min) before / after, 2 cores | ${outcomes.map((o) => (o.figures ? o.figures.load.map((l) => fmt(l, 1)).join(' / ') : '')).join(' | ')} |`,
  );
  for (const o of outcomes) if (o.failed) out.push('', `**${o.system.name} could not be run**: ${o.failed}`);
  out.push('', '## Where Troupe (as advised) is not ahead', '');
  out.push(behind.length ? behind.map((b) => `- ${b}`).join('\n') : '- nowhere in this run');
  out.push('', 'Why, and what it would take: [docs/performance.md](../docs/performance.md#beside-ray-serve-kserve-and-bentoml).');

  out.push('', "## Triton's perf_analyzer", '');
  out.push(
    'Its own figures (client side, from its CSV), over HTTP and gRPC, `-x 1 -s 1000 -p ' +
      `${SECONDS * 1000}\`, where a system answers it: it needs Triton's model configuration extension (\`/v2/models/{name}/config\`, gRPC \`ModelConfig\`).`,
    '',
    '| system | protocol | model | concurrency | infer/s | p50 ms | p99 ms |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: |',
  );
  for (const o of outcomes) {
    if (!o.figures?.perf) {
      if (o.figures) out.push(`| ${o.system.name} | - | - | - | does not speak the Open Inference Protocol | | |`);
      continue;
    }
    for (const p of o.figures.perf) {
      if (typeof p.run === 'string') out.push(`| ${o.system.name} | ${p.protocol} | ${p.what} | | ${p.run.replace(/\|/g, '/')} | | |`);
      else
        for (const row of p.run.rows)
          out.push(
            `| ${o.system.name} | ${p.protocol} | ${p.what} | ${row.concurrency} | ${fmt(row.inferPerSecond)} | ${fmt(row.p50Us / 1000, 3)} | ${fmt(row.p99Us / 1000, 3)} |`,
          );
    }
  }
  return `${out.join('\n')}\n`;
}

const started = new Date();
const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-peers-'));
const outcomes: Outcome[] = [];
try {
  const models = await writeExampleModels(dir);
  const link = join(dir, 'link.onnx');
  await writeFile(link, buildMlp({ seed: 4, outputDim: 64 }).bytes);
  const files: ModelFiles = { dir, mlp: models.mlp, mobilenet: models.mobilenet, link };
  for (const system of CHOSEN) {
    process.stderr.write(`bench:peers: ${system.name}\n`);
    try {
      outcomes.push({ system, figures: await measure(system, files, dir) });
    } catch (err) {
      outcomes.push({ system, failed: (err as Error).message.replace(/\s+/g, ' ').slice(0, 600) });
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
const text = report(outcomes, started);
process.stdout.write(text);
if (!process.env.PEERS) await writeFile(new URL('../../../bench/RESULTS-peers.md', import.meta.url), text);
