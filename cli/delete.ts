import { z } from 'zod';
import { TroupeError } from '../runtime/internal.js';
import { helpOf, parseFlags, specOf } from './flags.js';
import type { ArgDef, FlagDef } from './flags.js';
import { DEFAULT_HEAD, HeadUrlSchema, headClient, splitPositionals } from './http-client.js';

export const DELETE_ARGS: readonly ArgDef[] = [{ name: 'NAME', help: "a graph's or a deployment's name" }];

export const DELETE_FLAGS: readonly FlagDef[] = [
  {
    name: 'force',
    help: 'delete a deployment even while graphs call it (they then fail until it is\ndeployed again); without it that is refused with TROUPE_ERR_DEPLOYMENT_IN_USE',
  },
  { name: 'head', value: 'URL', help: `the head (default ${DEFAULT_HEAD}, or TROUPE_HEAD)` },
  { name: 'token', value: 'TOKEN', help: 'cluster token (or TROUPE_TOKEN)' },
];

export const DELETE_HELP = helpOf(
  'troupe delete NAME: remove a graph (its models stay), or drain and remove a deployment',
  DELETE_ARGS,
  DELETE_FLAGS,
);

export const DeleteFlagsSchema = z.object({
  head: HeadUrlSchema.prefault(DEFAULT_HEAD),
  token: z.string().min(8, 'tokens are at least 8 characters').optional(),
  force: z.boolean().default(false),
});

const DeletedSchema = z.object({ name: z.string(), kind: z.enum(['graph', 'deployment']) });

/** `troupe delete NAME [--force]`: DELETE /api/v1/deployments/NAME, the same rule the SDK's undeploy follows. */
export async function deleteCommand(argv: string[]): Promise<void> {
  const spec = specOf(DELETE_FLAGS);
  const { positionals, flags: rest } = splitPositionals('delete', argv, spec);
  const flags = parseFlags('delete', rest, spec, DeleteFlagsSchema);
  if (positionals.length !== 1) {
    throw new TroupeError(
      'TROUPE_ERR_BAD_FLAG',
      `delete: ${positionals.length === 0 ? 'NAME is required' : `one NAME only, got ${positionals.length}`} (see troupe delete --help)`,
    );
  }
  const name = positionals[0]!;
  const client = headClient(flags.head, flags.token ?? process.env.TROUPE_TOKEN);
  const answer = await client.request('DELETE', `/api/v1/deployments/${encodeURIComponent(name)}${flags.force ? '?force=true' : ''}`);
  const deleted = DeletedSchema.parse(answer.body);
  process.stdout.write(`${deleted.kind} '${deleted.name}' deleted\n`);
}
