import { z } from 'zod';
import { ClusterViewSchema, groupLoads, groupLoadsLine, plural } from '../runtime/internal.js';
import type { ClusterView } from '../runtime/internal.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { FlagDef } from './flags.js';
import { DEFAULT_HEAD, HeadUrlSchema, headClient } from './http-client.js';
import { isSplit, replicaCounts, versionsLine } from './split-view.js';

export const STATUS_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: `the head (default ${DEFAULT_HEAD}, or TROUPE_HEAD)` },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN; only needed by heads that ask for it)' },
  { name: 'json', help: "print the head's JSON (GET /api/v1/cluster) as it is" },
];

export const STATUS_HELP = helpOf("troupe status: nodes, deployments and actors, and graphs, from the head's HTTP API", [], STATUS_FLAGS);

export const StatusFlagsSchema = z.object({
  head: HeadUrlSchema.prefault(DEFAULT_HEAD),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  json: z.boolean().default(false),
});

/** The cluster as a few aligned lines a person can scan. */
export function formatCluster(view: ClusterView): string {
  const lines: string[] = [`nodes (${view.nodes.length}):`];
  for (const n of view.nodes) {
    const gpus =
      n.gpus.length === 0
        ? 'no GPUs'
        : `${n.gpus.length} GPU${n.gpus.length > 1 ? 's' : ''}${n.gpus.some((g) => g.simulated) ? ' (simulated)' : ''}`;
    lines.push(`  ${n.name.padEnd(16)} ${n.state.padEnd(8)} ${n.resources.cpus} CPUs, ${gpus}, ${n.address}`);
  }
  lines.push(`deployments (${view.deployments.length}):`);
  const byName = new Map(view.deployments.map((d) => [d.name, d]));
  for (const d of view.deployments) {
    const { ready, replicas } = replicaCounts(d, byName);
    // A split's replicas are its versions' (listed as deployments of their own below it).
    const what = isSplit(d) ? `split: ${versionsLine(d, byName)}` : `model ${d.model}`;
    lines.push(`  ${d.name.padEnd(16)} ${d.state.padEnd(10)} ${ready}/${replicas} READY  ${what}`);
    for (const a of d.actors) {
      const where = [a.node ? `node ${a.node}` : 'no node', a.device, a.pid ? `pid ${a.pid}` : null, `restarts ${a.restarts}`]
        .filter(Boolean)
        .join('  ');
      lines.push(`    ${a.name.padEnd(14)} ${a.state.padEnd(10)} ${where}${a.reason ? `  (${a.reason})` : ''}`);
      const groups = groupLoads(a.concurrencyGroups, a.stats?.groups);
      if (groups) lines.push(`      concurrency groups: ${groupLoadsLine(groups)}`);
    }
  }
  const graphs = view.graphs ?? [];
  if (graphs.length > 0) lines.push(`graphs (${graphs.length}):`);
  for (const g of graphs)
    lines.push(`  ${g.name.padEnd(16)} ${g.kind.padEnd(12)} ${plural(g.steps, 'step').padEnd(8)}  calls ${g.deployments.join(', ')}`);
  return `${lines.join('\n')}\n`;
}

export async function statusCommand(argv: string[]): Promise<void> {
  const flags = parseFlags('status', argv, specOf(STATUS_FLAGS), StatusFlagsSchema);
  const client = headClient(flags.head, flags.token ?? process.env.TROUPE_TOKEN);
  const { body } = await client.request('GET', '/api/v1/cluster');
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return;
  }
  process.stdout.write(formatCluster(ClusterViewSchema.parse(body)));
}
