import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { TroupeError, onParentGone } from '../runtime/internal.js';

export type FlagSpec = NonNullable<ParseArgsConfig['options']>;

/**
 * One flag of a command, the single definition its parser, its `--help` and the reference in
 * docs/cli.md (cli/reference.ts) are all made from, so they cannot drift apart.
 */
export interface FlagDef {
  /** kebab-case, without the dashes. */
  name: string;
  /** What the value is called in help (`PORT`); absent for a switch such as `--json`. */
  value?: string;
  /** One or more lines ('\n' between them). */
  help: string;
  /** Shown without brackets in the synopsis. */
  required?: boolean;
  /** Accepted but not shown: an older name another flag's help mentions. */
  hidden?: boolean;
}

/** A positional argument, shown in help beside the flags. */
export interface ArgDef {
  name: string;
  help: string;
}

/** What node:util parseArgs needs: every flag takes a string, except switches. */
export function specOf(flags: readonly FlagDef[]): FlagSpec {
  return Object.fromEntries(flags.map((f) => [f.name, { type: f.value === undefined ? 'boolean' : 'string' }])) as FlagSpec;
}

/** `--port PORT`, `--json` */
const labelOf = (f: FlagDef) => `--${f.name}${f.value === undefined ? '' : ` ${f.value}`}`;

/** `FILE`, `--head URL`, `[--json]`...: the synopsis docs/cli.md shows, one item per argument or flag. */
export function synopsisOf(args: readonly ArgDef[], flags: readonly FlagDef[]): string[] {
  const shown = flags.filter((f) => !f.hidden).map((f) => (f.required ? labelOf(f) : `[${labelOf(f)}]`));
  return [...args.map((a) => a.name), ...shown];
}

/** A command's `--help`: its title line, then each argument and flag with its help in one column. */
export function helpOf(title: string, args: readonly ArgDef[], flags: readonly FlagDef[], footer = ''): string {
  const rows: [string, string][] = [
    ...args.map((a): [string, string] => [a.name, a.help]),
    ...flags.filter((f) => !f.hidden).map((f): [string, string] => [labelOf(f), f.help]),
  ];
  // Labels up to this wide share one column; a longer one puts its help on the same line after two spaces.
  const width = Math.min(28, Math.max(...rows.map(([label]) => label.length))) + 2;
  const lines = rows.map(([label, help]) => {
    const [first = '', ...more] = help.split('\n');
    const pad = ' '.repeat(Math.max(2, width - label.length));
    return [`  ${label}${pad}${first}`, ...more.map((line) => `  ${' '.repeat(width)}${line}`)].join('\n');
  });
  return `${title}\n\n${lines.join('\n')}\n${footer ? `\n${footer.trimEnd()}\n` : ''}`;
}

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
