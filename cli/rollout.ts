import { z } from 'zod';
import { TroupeError } from '../runtime/internal.js';
import type { DeploymentView } from '../runtime/internal.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { ArgDef, FlagDef } from './flags.js';
import { DEFAULT_HEAD, HeadUrlSchema, headClient, splitPositionals } from './http-client.js';

/** `troupe promote NAME VERSION` and `troupe rollback NAME`: a rollout ended in one command (docs/rollouts.md). */

export const PROMOTE_ARGS: readonly ArgDef[] = [
  { name: 'NAME', help: 'a deployment split between versions' },
  { name: 'VERSION', help: 'the version that takes every call' },
];
export const ROLLBACK_ARGS: readonly ArgDef[] = [{ name: 'NAME', help: 'a deployment split between versions' }];

export const ROLLOUT_FLAGS: readonly FlagDef[] = [
  { name: 'head', value: 'URL', help: `the head (default ${DEFAULT_HEAD}, or TROUPE_HEAD)` },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
];

export const PROMOTE_HELP = helpOf(
  'troupe promote NAME VERSION: every call goes to VERSION, the other versions stop (the split is kept for a rollback)',
  PROMOTE_ARGS,
  ROLLOUT_FLAGS,
);
export const ROLLBACK_HELP = helpOf(
  'troupe rollback NAME: after a promotion, the split as it was before it; otherwise the first version takes every call',
  ROLLBACK_ARGS,
  ROLLOUT_FLAGS,
);

export const RolloutFlagsSchema = z.object({
  head: HeadUrlSchema.prefault(DEFAULT_HEAD),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
});

async function rollout(command: 'promote' | 'rollback', argv: string[], wanted: number): Promise<void> {
  const spec = specOf(ROLLOUT_FLAGS);
  const { positionals, flags: rest } = splitPositionals(command, argv, spec);
  const flags = parseFlags(command, rest, spec, RolloutFlagsSchema);
  if (positionals.length !== wanted)
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      `${command}: ${wanted === 2 ? 'NAME and VERSION' : 'NAME'} ${wanted === 2 ? 'are' : 'is'} required, got ${positionals.length} argument(s) (see troupe ${command} --help)`,
    );
  const [name, version] = positionals as [string, string | undefined];
  const client = headClient(flags.head, flags.token ?? process.env.TROUPE_TOKEN);
  const answer = await client.request(
    'POST',
    `/api/v1/deployments/${encodeURIComponent(name)}/${command}`,
    command === 'promote' ? { version } : undefined,
  );
  const view = answer.body as DeploymentView;
  process.stdout.write(`deployment '${view.name}' ${answer.status === 202 ? 'is still deploying' : 'is READY'}:\n`);
  for (const v of view.versions ?? [])
    process.stdout.write(`  version ${v.version}: ${v.weight}% of calls, ${v.model}, ${v.state} (deployment ${v.deployment})\n`);
}

export const promoteCommand = (argv: string[]) => rollout('promote', argv, 2);
export const rollbackCommand = (argv: string[]) => rollout('rollback', argv, 1);
