#!/usr/bin/env node
import { TroupeError } from '../runtime/internal.js';
import { COMMANDS } from './commands.js';
import { takeLogFormat } from './log-format.js';
import { usage } from './reference.js';

function fail(err: unknown): never {
  const code = err instanceof TroupeError ? err.code : 'TROUPE_ERR_INTERNAL';
  process.stderr.write(`troupe: ${code}: ${(err as Error).message ?? String(err)}\n`);
  // A certificate file that cannot be used is a bad flag value too.
  process.exit(err instanceof TroupeError && (err.code === 'TROUPE_ERR_BAD_FLAG' || err.code === 'TROUPE_ERR_BAD_TLS') ? 2 : 1);
}

async function main(argv: string[]): Promise<void> {
  const { format, rest: args } = takeLogFormat(argv);
  // Before any logger exists: runtime/log.ts reads it, and the processes started from here inherit it.
  process.env.TROUPE_LOG_FORMAT = format;
  const [name, ...rest] = args;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) throw new TroupeError('TROUPE_ERR_BAD_FLAG', `unknown command '${name}'\n\n${usage()}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.help);
    return;
  }
  await command.run(rest);
}

main(process.argv.slice(2)).catch(fail);
