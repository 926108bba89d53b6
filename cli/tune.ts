import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { z } from 'zod';
import { ModelDeploymentSchema, TroupeError, connect } from '../runtime/internal.js';
import type { Cluster } from '../runtime/internal.js';
import { startChild, stopChild } from './children.js';
import type { Child } from './children.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { ArgDef, FlagDef } from './flags.js';
import { HeadUrlSchema, splitPositionals } from './http-client.js';
import { closedLoop } from './tune/closed-loop.js';
import type { LoadResult } from './tune/closed-loop.js';
import { DOORS, doorCaller, sampleInputs } from './tune/doors.js';
import { layoutLabel, sweep, specOf as layoutSpec } from './tune/layouts.js';
import type { Layout } from './tune/layouts.js';
import { progressBar } from './tune/progress.js';

export const TUNE_ARGS: readonly ArgDef[] = [
  {
    name: 'MODEL',
    help: "an ONNX file: tune starts a cluster of its own (a head and one agent\nover the file's folder); with --head, the model as troupe deploy names it",
  },
];

export const TUNE_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: 'tune on this cluster instead, deploying NAME there (replaced each layout)' },
  {
    name: 'grpc',
    value: 'HOST:PORT',
    help: "with --head and --door grpc: the head's gRPC endpoint (default: the\nhead's host, its port + 1, as troupe head serves it)",
  },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
  { name: 'name', value: 'NAME', help: "the deployment's name while tuning and in the spec written (default tune)" },
  { name: 'door', value: 'DOOR', help: 'what the load comes through: http (the inference protocol, binary;\ndefault), grpc, or sdk' },
  { name: 'concurrency', value: 'N', help: 'calls in flight, one connection each over HTTP (default 16)' },
  { name: 'seconds', value: 'S', help: 'measured seconds per layout, after 0.5 s of warm-up (default 3)' },
  { name: 'batch-sizes', value: 'LIST', help: 'batch sizes to try, comma-separated (default 1,64; 1 is no batching)' },
  {
    name: 'delays-ms',
    value: 'LIST',
    help: "batch delays to try: 0 runs a batch at once when a replica is idle;\nabove 0 a batch's first call waits that long for company (default 0)",
  },
  { name: 'cpus', value: 'N', help: "cores the layouts divide into replicas x instances x threads (default:\nthis machine's)" },
  { name: 'max-minutes', value: 'M', help: 'stop starting layouts once this much time has passed (default 10)' },
  { name: 'p99-ms', value: 'MS', help: 'the best layout is the fastest whose p99 latency is at most MS' },
  { name: 'write', value: 'FILE', help: 'write the best layout as a spec troupe deploy takes (.yaml or .json)' },
];

export const TUNE_HELP = helpOf(
  'troupe tune MODEL: deploy a model in a sweep of layouts, load each, and print the fastest',
  TUNE_ARGS,
  TUNE_FLAGS,
);

const SPEC = specOf(TUNE_FLAGS);

/** A comma-separated list of whole numbers within [min, max]. */
const listOf = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be whole numbers separated by commas, e.g. 1,8,64')
    .transform((s) => [...new Set(s.split(',').map(Number))])
    .refine((l) => l.every((n) => n >= min && n <= max), `each must be between ${min} and ${max}`);

export const TuneFlagsSchema = z.object({
  head: HeadUrlSchema.optional(),
  grpc: z
    .string()
    .regex(/^[^\s:]+:\d{1,5}$/, 'must be HOST:PORT')
    .optional(),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  name: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lower-case letters, digits and dashes, at most 63')
    .default('tune'),
  door: z.enum(DOORS, { message: `must be one of ${DOORS.join(', ')}` }).default('http'),
  concurrency: z.coerce.number().int('must be a whole number').min(1).max(4096).default(16),
  seconds: z.coerce.number().min(0.1, 'must be at least 0.1').max(600).default(3),
  batchSizes: listOf(1, 65_536).default([1, 64]),
  delaysMs: listOf(0, 60_000).default([0]),
  cpus: z.coerce.number().int('must be a whole number').min(1).max(1024).optional(),
  maxMinutes: z.coerce
    .number()
    .positive('must be above 0')
    .max(24 * 60)
    .default(10),
  p99Ms: z.coerce.number().positive('must be above 0').optional(),
  write: z
    .string()
    .min(1)
    .refine((f) => ['.yaml', '.yml', '.json'].includes(extname(f).toLowerCase()), 'must end in .yaml, .yml or .json')
    .optional(),
});
type TuneFlags = z.output<typeof TuneFlagsSchema>;

export interface TuneRow {
  layout: Layout;
  /** What the replicas chose, for the first-deploy row (describe()'s layout). */
  chosen?: string;
  result: LoadResult;
}

/** A cluster to tune on: the one named, or one of tune's own over the model file's folder. */
async function clusterFor(
  flags: TuneFlags,
  model: string,
): Promise<{ url: string; grpcAddress?: string; model: string; stop: () => Promise<void> }> {
  if (flags.head) {
    const head = new URL(flags.head);
    const grpcAddress = flags.grpc ?? `${head.hostname}:${Number(head.port || 80) + 1}`;
    return { url: flags.head, grpcAddress, model, stop: async () => {} };
  }
  const file = resolve(model);
  const found = await stat(file).catch(() => undefined);
  if (!found?.isFile())
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `tune: MODEL '${model}' is not a file (give an ONNX file, or --head URL)`);
  const dir = await mkdtemp(join(tmpdir(), 'troupe-tune-'));
  // The processes under tune say only what needs attention unless TROUPE_LOG_LEVEL asks for more.
  const env = { TROUPE_LOG_LEVEL: 'warn', ...process.env };
  const children: Child[] = [];
  const stop = async () => {
    for (const child of children) await stopChild(child, 15_000);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const head = startChild(
      ['head', '--port', '0', '--grpc-port', '0', '--data-dir', join(dir, 'head')],
      /listening on (\S+(?: and gRPC on \S+)?)/,
      30_000,
      env,
    );
    children.push(head);
    const [url = '', grpcAddress] = (await head.line).split(' and gRPC on ');
    const agentArgs = ['agent', '--head', url, '--name', 'tune', '--model-dir', dirname(file), '--state-dir', join(dir, 'agent')];
    const agent = startChild(agentArgs, /joined/, 30_000, env, { ownGroup: true });
    children.unshift(agent);
    await agent.line;
    // The head drains first, then the agent stops its actors.
    children.reverse();
    return { url, ...(grpcAddress ? { grpcAddress } : {}), model: basename(file), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** With one replica, waits (bounded) until it serves its HTTP itself, as a first deploy's would. */
async function settled(cluster: Cluster, name: string): Promise<string | undefined> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const view = (await cluster.describe()).deployments.find((d) => d.name === name);
    const chosen = view?.layout?.chosen;
    if (!chosen || view.replicas !== 1 || chosen.includes('served by the replica') || Date.now() > deadline) return chosen;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function measure(
  cluster: Cluster,
  target: { url: string; grpcAddress?: string | undefined; token?: string | undefined },
  flags: TuneFlags,
  model: string,
  layout: Layout,
): Promise<TuneRow> {
  const spec = layoutSpec(flags.name, model, layout);
  const view = await cluster.update({ ...spec, maxQueue: 100_000 });
  const chosen = await settled(cluster, flags.name);
  if (!view.metadata) throw new TroupeError('TROUPE_ERR_NOT_READY', `tune: '${flags.name}' is READY without a signature`);
  const caller = doorCaller(
    flags.door,
    { url: target.url, grpcAddress: target.grpcAddress, cluster, ...(target.token ? { token: target.token } : {}) },
    flags.name,
    sampleInputs(view.metadata),
    flags.concurrency,
  );
  try {
    await caller.call();
    const result = await closedLoop(() => caller.call(), { concurrency: flags.concurrency, seconds: flags.seconds, warmupSeconds: 0.5 });
    return { layout, ...(layout.auto && chosen ? { chosen } : {}), result };
  } finally {
    await caller.close();
  }
}

const fixed = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** The fastest row without errors whose p99 is within the budget, if any. */
export function bestRow(rows: readonly TuneRow[], p99Ms: number | undefined): TuneRow | undefined {
  return rows
    .filter((r) => r.result.errors === 0 && r.result.requests > 0 && (p99Ms === undefined || r.result.p99Ms <= p99Ms))
    .reduce<TuneRow | undefined>((a, b) => (!a || b.result.rps > a.result.rps ? b : a), undefined);
}

function table(rows: readonly TuneRow[], best: TuneRow | undefined): string {
  const lines = ['| layout | req/s | p50 ms | p99 ms | errors |', '| --- | ---: | ---: | ---: | ---: |'];
  for (const r of rows) {
    const label = `${layoutLabel(r.layout)}${r.chosen ? `: ${r.chosen}` : ''}${r === best ? ' (best)' : ''}`;
    lines.push(`| ${label} | ${fixed(r.result.rps, 0)} | ${fixed(r.result.p50Ms, 3)} | ${fixed(r.result.p99Ms, 3)} | ${r.result.errors} |`);
  }
  return lines.join('\n');
}

export async function tuneCommand(argv: string[]): Promise<void> {
  const { positionals, flags: rest } = splitPositionals('tune', argv, SPEC);
  const flags = parseFlags('tune', rest, SPEC, TuneFlagsSchema);
  if (positionals.length !== 1)
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      `tune: ${positionals.length === 0 ? 'MODEL is required' : `one MODEL only, got ${positionals.length}`} (see troupe tune --help)`,
    );
  const token = flags.token ?? process.env.TROUPE_TOKEN;
  const layouts = sweep(flags.cpus ?? availableParallelism(), flags.batchSizes, flags.delaysMs);
  const started = Date.now();
  const budgetMs = flags.maxMinutes * 60_000;
  const bar = progressBar(process.stderr, layouts.length);
  const target = await clusterFor(flags, positionals[0]!);
  const rows: TuneRow[] = [];
  let cluster: Cluster | undefined;
  try {
    cluster = await connect(target.url, token ? { token } : {});
    for (const layout of layouts) {
      if (Date.now() - started > budgetMs) break;
      bar.update(rows.length, layoutLabel(layout));
      rows.push(await measure(cluster, { url: target.url, grpcAddress: target.grpcAddress, token }, flags, target.model, layout));
    }
    bar.done();
    await cluster.undeploy(flags.name).catch(() => {});
  } finally {
    bar.done();
    await cluster?.close();
    await target.stop();
  }
  const best = bestRow(rows, flags.p99Ms);
  const out: string[] = [
    `troupe tune ${positionals[0]}: ${rows.length} of ${layouts.length} layouts over ${flags.door}, ${flags.concurrency} in flight, ${flags.seconds} s each`,
    '',
    table(rows, best),
    '',
  ];
  if (rows.length < layouts.length)
    out.push(`--max-minutes ${flags.maxMinutes} passed: ${layouts.length - rows.length} layouts not measured`);
  if (!best) {
    out.push(`no layout answered without errors${flags.p99Ms !== undefined ? ` within p99 ${flags.p99Ms} ms` : ''}`);
    process.stdout.write(`${out.join('\n')}\n`);
    process.exitCode = 1;
    return;
  }
  const spec = ModelDeploymentSchema.parse(layoutSpec(flags.name, target.model, best.layout));
  const shown = layoutSpec(flags.name, target.model, best.layout);
  out.push(
    `best${flags.p99Ms !== undefined ? ` with p99 within ${flags.p99Ms} ms` : ''}: ${layoutLabel(best.layout)}, ${fixed(best.result.rps, 0)} req/s`,
  );
  out.push('', toYaml(shown).trimEnd());
  if (flags.write) {
    await writeFile(flags.write, extname(flags.write).toLowerCase() === '.json' ? `${JSON.stringify(shown, null, 2)}\n` : toYaml(shown));
    out.push('', `wrote ${flags.write} (${spec.name}): troupe deploy ${flags.write}`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
}
