import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { DeploymentViewSchema, TroupeError, looksLikeGraphDocument } from '../runtime/internal.js';
import type { DeploymentView } from '../runtime/internal.js';
import { DEFAULT_DEPLOY_TIMEOUT_S, deployTimeoutMessage, pendingActors } from '../runtime/deploy-timeout.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { ArgDef, FlagDef } from './flags.js';
import { isSplit, replicaCounts, versionsLine } from './split-view.js';
import type { ViewsByName } from './split-view.js';
import { DEFAULT_HEAD, HeadUrlSchema, headClient, splitPositionals } from './http-client.js';
import type { HeadClient } from './http-client.js';

export const DEPLOY_ARGS: readonly ArgDef[] = [
  {
    name: 'FILE',
    help: `e.g. {"name": "mlp2", "model": "mlp.onnx", "replicas": 2, "cpus": 0.25}: "model" is an\nuploaded model's name or a path under the agents' --model-dir; or a graph's\nJSON form ({"graph": NAME, "nodes": [...]}, the SDK builders' toJSON()).\nA READY deployment with another spec is replaced, and the output says so`,
  },
];

export const DEPLOY_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: `the head (default ${DEFAULT_HEAD}, or TROUPE_HEAD)` },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
  { name: 'wait', help: 'wait until every replica is READY, showing progress (default)' },
  { name: 'no-wait', help: 'return once the head has accepted the deployment' },
  {
    name: 'timeout-s',
    value: 'S',
    help: `wait at most S seconds for READY (default ${DEFAULT_DEPLOY_TIMEOUT_S}); past it, print each\nactor not READY and why, and exit 1 (the deployment stays and keeps\nbeing placed). --timeout S is its older name.`,
  },
  { name: 'timeout', value: 'S', help: 'the older name of --timeout-s', hidden: true },
];

export const DEPLOY_HELP = helpOf(
  'troupe deploy FILE: create or update a deployment or a graph from a JSON or YAML file',
  DEPLOY_ARGS,
  DEPLOY_FLAGS,
);

const SPEC = specOf(DEPLOY_FLAGS);

const SecondsSchema = z.coerce.number().positive('must be seconds above 0').max(86_400, 'must be at most 86400 seconds');

/** The flags as parsed, before the checks between them. */
export const DeployFlagsObject = z.object({
  head: HeadUrlSchema.prefault(DEFAULT_HEAD),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  wait: z.boolean().optional(),
  noWait: z.boolean().optional(),
  timeoutS: SecondsSchema.optional(),
  timeout: SecondsSchema.optional(),
});

const Schema = DeployFlagsObject.refine((f) => !(f.wait && f.noWait), { message: 'give --wait or --no-wait, not both', path: ['noWait'] })
  .refine((f) => f.timeoutS === undefined || f.timeout === undefined, {
    message: 'give --timeout-s or its older name --timeout, not both',
    path: ['timeoutS'],
  })
  .transform(({ timeout, ...f }) => ({ ...f, timeoutS: f.timeoutS ?? timeout ?? DEFAULT_DEPLOY_TIMEOUT_S }));

/** What a PUT that replaced a READY deployment adds to its answer. */
const ReplacedSchema = z.object({ replaced: z.string().optional() });

/** A graph's PUT answer: the graph deployed, or (202) still deploying with what is missing. */
const GraphAnswerSchema = z.object({
  replaced: z.string().optional(),
  deployments: z.array(DeploymentViewSchema).optional(),
  message: z.string().optional(),
});

/**
 * Deploys a graph document: one PUT, waited for up to the bound (a graph's progress is its
 * deployments', which the 202 lists when the bound passes).
 */
async function deployGraph(client: HeadClient, doc: Record<string, unknown>, wait: boolean, timeoutS: number): Promise<void> {
  const name = doc.graph as string;
  const answer = await client.request(
    'PUT',
    `/api/v1/deployments/${encodeURIComponent(name)}?wait=${wait}&timeoutS=${Math.min(timeoutS, PUT_WAIT_S)}`,
    doc,
  );
  const body = GraphAnswerSchema.parse(answer.body);
  if (body.replaced) process.stdout.write(`${body.replaced}\n`);
  if (!wait) return void process.stdout.write(`graph '${name}' accepted\n`);
  for (const view of body.deployments ?? []) process.stdout.write(`  ${progressLine(view)}\n`);
  if (answer.status === 202)
    throw new TroupeError('TROUPE_ERR_DEPLOY_TIMEOUT', body.message ?? `graph '${name}' is not READY after ${timeoutS} s`);
  process.stdout.write(`graph '${name}' is READY: POST /v2/models/${name}/infer runs it\n`);
}

/** Every PUT asks the head to wait at most this long, well inside fetch's 300 s header timeout. */
const PUT_WAIT_S = 120;

async function readSpec(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `deploy: cannot read FILE '${file}': ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_SPEC',
      `${file} is not valid ${extname(file).toLowerCase() === '.json' ? 'JSON' : 'YAML or JSON'}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${file} must hold one object such as {"name": "mlp", "model": "mlp.onnx"}`);
  const spec = doc as Record<string, unknown>;
  if (looksLikeGraphDocument(spec)) {
    if (typeof spec.graph !== 'string') throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${file}: "graph" must be the graph's name`);
    return spec;
  }
  if (typeof spec.name !== 'string') throw new TroupeError('TROUPE_ERR_BAD_SPEC', `${file} has no "name": say which deployment it is`);
  return spec;
}

/** `2/3 READY · mlp#0 READY on local (pid 41), mlp#1 STARTING on local, mlp#2 PENDING: needs 1 GPU…` */
export function progressLine(view: DeploymentView, byName: ViewsByName = new Map()): string {
  const { ready, replicas } = replicaCounts(view, byName);
  // A split runs nothing itself: its versions' deployments hold the replicas.
  if (isSplit(view)) {
    const counted = view.versions.every((v) => byName.has(v.deployment));
    return `${view.name}: ${counted ? `${ready}/${replicas} READY across its versions` : 'split between versions'} · ${versionsLine(view, byName)}`;
  }
  const actors = view.actors.map((a) => {
    const where = a.node ? ` on ${a.node}${a.pid ? ` (pid ${a.pid})` : ''}` : '';
    return `${a.name} ${a.state}${where}${a.reason && a.state !== 'READY' ? `: ${a.reason}` : ''}`;
  });
  return `${view.name}: ${ready}/${replicas} READY · ${actors.join(', ') || 'no actors yet'}`;
}

function versionProgress(deployment: string, versions: ViewsByName): string {
  const runs = versions.get(deployment);
  return runs ? progressLine(runs) : `${deployment}: not found`;
}

async function current(client: HeadClient, name: string): Promise<DeploymentView | undefined> {
  try {
    return DeploymentViewSchema.parse((await client.request('GET', `/api/v1/deployments/${encodeURIComponent(name)}`)).body);
  } catch {
    return undefined;
  }
}

/** The deployments that run a split's versions, by name (none for a deployment that is not split). */
async function versionViews(client: HeadClient, view: DeploymentView): Promise<ViewsByName> {
  if (!isSplit(view)) return new Map();
  const views = await Promise.all(view.versions.map((v) => current(client, v.deployment)));
  return new Map(views.flatMap((v) => (v ? [[v.name, v] as const] : [])));
}

export async function deployCommand(argv: string[]): Promise<void> {
  const { positionals, flags: rest } = splitPositionals('deploy', argv, SPEC);
  const flags = parseFlags('deploy', rest, SPEC, Schema);
  if (positionals.length !== 1) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      `deploy: ${positionals.length === 0 ? 'FILE is required' : `one FILE only, got ${positionals.length}`} (see troupe deploy --help)`,
    );
  }
  const spec = await readSpec(positionals[0]!);
  const client = headClient(flags.head, flags.token ?? process.env.TROUPE_TOKEN);
  const wait = !flags.noWait;
  if (looksLikeGraphDocument(spec)) return deployGraph(client, spec, wait, flags.timeoutS);
  const name = encodeURIComponent(spec.name as string);
  const tty = process.stdout.isTTY === true;
  let shown = '';
  const show = (line: string) => {
    if (line === shown) return;
    shown = line;
    process.stdout.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  };

  const deadline = Date.now() + flags.timeoutS * 1000;
  let settled = false;
  let view: DeploymentView | undefined;
  let replaced: string | undefined;
  // The PUT carries the outcome (READY, or the error with its code); polling only shows progress.
  const put = (async () => {
    for (;;) {
      const waitS = Math.max(0.1, Math.min(PUT_WAIT_S, Math.round((deadline - Date.now()) / 100) / 10));
      const answer = await client.request('PUT', `/api/v1/deployments/${name}?wait=${wait}&timeoutS=${waitS}`, spec);
      view = DeploymentViewSchema.parse(answer.body);
      replaced = ReplacedSchema.parse(answer.body).replaced;
      if (answer.status !== 202 || !wait || Date.now() >= deadline) return answer.status;
    }
  })().finally(() => (settled = true));
  while (wait && !settled) {
    await Promise.race([put.catch(() => undefined), new Promise((r) => setTimeout(r, 250))]);
    if (settled) break;
    const now = await current(client, spec.name as string);
    if (now) show(progressLine(now, await versionViews(client, now)));
  }
  const status = await put;
  if (tty && shown) process.stdout.write('\n');
  if (!view) return;
  const versions = await versionViews(client, view);
  if (replaced) process.stdout.write(`${replaced}\n`);
  if (!wait) {
    process.stdout.write(`deployment '${view.name}' accepted: ${progressLine(view, versions)}\n`);
    return;
  }
  if (status === 202) {
    // Each actor on its own line, then the error (stderr, exit 1) naming them all in one message.
    for (const p of [view, ...versions.values()].flatMap((v) => pendingActors(v)))
      process.stdout.write(`  ${p.actor} ${p.state}${p.node ? ` on ${p.node}` : ''}${p.reason ? `: ${p.reason}` : ''}\n`);
    throw new TroupeError(
      'TROUPE_ERR_DEPLOY_TIMEOUT',
      deployTimeoutMessage({ kind: 'deployment', name: view.name }, [view], flags.timeoutS * 1000),
    );
  }
  process.stdout.write(`deployment '${view.name}' is READY: ${progressLine(view, versions)}\n`);
  for (const v of view.versions ?? [])
    process.stdout.write(
      `  version ${v.version}: ${v.weight}% of calls, ${v.model}, ${v.state} (${versionProgress(v.deployment, versions)})\n`,
    );
}
