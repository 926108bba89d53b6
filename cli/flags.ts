import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { TroupeError, onParentGone } from '../runtime/index.js';

export type FlagSpec = NonNullable<ParseArgsConfig['options']>;

/**
 * Parses a command's flags strictly (unknown flags and missing values are errors) and validates
 * the values with zod, so every bad flag gets TROUPE_ERR_BAD_FLAG naming the flag.
 */
export function parseFlags<S extends z.ZodType>(command: string, argv: string[], spec: FlagSpec, schema: S): z.output<S> {
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: argv, options: spec, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `${command}: ${(err as Error).message.split('\n')[0]} (see troupe ${command} --help)`);
  }
  // Flags are kebab-case on the command line and camelCase in the schema.
  const camel = Object.fromEntries(Object.entries(values).map(([k, v]) => [k.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()), v]));
  const parsed = schema.safeParse(camel);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const flag = issue.path.length ? `--${String(issue.path[0]).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : 'flags';
    throw new TroupeError('TROUPE_ERR_BAD_FLAG', `${command}: ${flag}: ${issue.message}`);
  }
  return parsed.data;
}

/** A port flag or variable: 0-65535, 0 meaning any free port. */
export const PortSchema = z.coerce.number().int('must be a whole number').min(0).max(65535);

/** Exits the process on SIGINT/SIGTERM, or when the parent that started us over IPC goes away. */
export function onShutdown(stop: () => Promise<void>): void {
  let stopping = false;
  const run = (code: number) => {
    if (stopping) return;
    stopping = true;
    stop().then(
      () => process.exit(code),
      (err: unknown) => {
        process.stderr.write(`troupe: error while stopping: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => run(0));
  process.on('SIGTERM', () => run(0));
  onParentGone(() => run(0));
}
