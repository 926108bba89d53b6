import { z } from 'zod';
import { LOG_FORMATS, TroupeError } from '../runtime/internal.js';
import type { LogFormat } from '../runtime/internal.js';
import type { FlagDef } from './flags.js';

/** The flag every command takes, wherever it stands on the command line. */
export const LOG_FORMAT_FLAG: FlagDef = {
  name: 'log-format',
  value: 'FORMAT',
  help: 'pretty (readable lines) or json (one object a line), on stderr; default:\npretty when stdout and stderr are terminals, else json (or TROUPE_LOG_FORMAT)',
};

const FormatSchema = z.enum(LOG_FORMATS, { error: `must be ${LOG_FORMATS.join(' or ')}` });

/**
 * Takes `--log-format F` (or `--log-format=F`) out of the command line and decides how this
 * process and every process it starts log: the flag, else TROUPE_LOG_FORMAT, else readable lines
 * when a person is watching (stdout and stderr are terminals) and JSON when a program reads them.
 * The decision goes into TROUPE_LOG_FORMAT, which runtime/log.ts reads and children inherit, so a
 * head and agent that `troupe up` starts (their stdout is a pipe to it) log as it does.
 */
export function takeLogFormat(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { format: LogFormat; rest: string[] } {
  const rest: string[] = [];
  let given: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--log-format') {
      given = argv[++i];
      if (given === undefined) throw new TroupeError('TROUPE_ERR_BAD_FLAG', `--log-format: needs a value, ${LOG_FORMATS.join(' or ')}`);
    } else if (arg.startsWith('--log-format=')) given = arg.slice('--log-format='.length);
    else rest.push(arg);
  }
  const source = given !== undefined ? '--log-format' : 'TROUPE_LOG_FORMAT';
  const wanted = given ?? env.TROUPE_LOG_FORMAT;
  if (wanted === undefined || wanted === '') {
    return { format: process.stdout.isTTY && process.stderr.isTTY ? 'pretty' : 'json', rest };
  }
  const parsed = FormatSchema.safeParse(wanted);
  if (!parsed.success)
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `${source}: ${parsed.error.issues[0]!.message}, not '${wanted.slice(0, 40)}'`);
  return { format: parsed.data, rest };
}
