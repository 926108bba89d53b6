import { parseArgs } from 'node:util';
import { z } from 'zod';

const count = (max: number) => z.coerce.number().int().min(1).max(max);

/** `npm run bench:scale -- --nodes N --gpus-per-node G --deployments D --replicas R [--actor-links relay|direct] [--json]`. */
export const ScaleOptionsSchema = z.object({
  nodes: count(100_000).default(100),
  gpusPerNode: count(64).default(8),
  deployments: count(10_000).default(10),
  /** Replicas per deployment (the spec allows at most 256). */
  replicas: count(256).default(80),
  json: z.boolean().default(false),
  /** How often each simulated agent heartbeats (a real agent: every second). */
  heartbeatMs: count(60_000).default(1000),
  /** Each actor reports stats this often whatever changed, as busy actors do; 0: only on change, as idle real actors (once). */
  actorStatsMs: z.coerce.number().int().min(0).max(60_000).default(0),
  /** Seconds of the idle (heartbeats only) window and of the status stream's window. */
  idleS: count(600).default(5),
  /** Kill one node holding actors and time their replacements (on by default). */
  kill: z.boolean().default(true),
  /** How actors reach the head: relayed by their node's agent (default, as `troupe agent --actor-links relay`) or a connection each. */
  actorLinks: z.enum(['relay', 'direct']).default('relay'),
  /** Write the head's V8 CPU profile into this directory when it exits (runtime/profiling.ts). */
  headCpuProf: z.string().min(1).optional(),
});
export type ScaleOptions = z.output<typeof ScaleOptionsSchema>;

export function parseScaleOptions(argv: string[]): ScaleOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string' },
      'gpus-per-node': { type: 'string' },
      deployments: { type: 'string' },
      replicas: { type: 'string' },
      json: { type: 'boolean' },
      'heartbeat-ms': { type: 'string' },
      'actor-stats-ms': { type: 'string' },
      'idle-s': { type: 'string' },
      'no-kill': { type: 'boolean' },
      'head-cpu-prof': { type: 'string' },
      'actor-links': { type: 'string' },
    },
    strict: true,
  });
  const parsed = ScaleOptionsSchema.safeParse({
    nodes: values.nodes,
    gpusPerNode: values['gpus-per-node'],
    deployments: values.deployments,
    replicas: values.replicas,
    json: values.json,
    heartbeatMs: values['heartbeat-ms'],
    actorStatsMs: values['actor-stats-ms'],
    idleS: values['idle-s'],
    kill: values['no-kill'] ? false : undefined,
    headCpuProf: values['head-cpu-prof'],
    actorLinks: values['actor-links'],
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`bench:scale: --${String(issue?.path[0] ?? '?')}: ${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}
