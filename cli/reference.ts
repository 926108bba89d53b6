import { COMMANDS } from './commands.js';
import { synopsisOf } from './flags.js';
import { LOG_FORMAT_FLAG } from './log-format.js';

/** `troupe --help`: the commands with their one-line summaries, and the flag every command takes. */
export function usage(): string {
  const lines = COMMANDS.map((c) => `  ${c.name.padEnd(8)}${c.summary}`);
  const [first = '', ...more] = LOG_FORMAT_FLAG.help.split('\n');
  const flag = `--${LOG_FORMAT_FLAG.name} ${LOG_FORMAT_FLAG.value}`;
  return `usage: troupe <command> [flags]

commands:
${lines.join('\n')}

every command takes:
  ${flag}  ${first}
${more.map((l) => `  ${' '.repeat(flag.length + 2)}${l}`).join('\n')}

Run 'troupe <command> --help' for a command's flags.
`;
}

/** `prefix` then `words`, broken between them so no line passes 100 characters. */
function wrap(prefix: string, words: readonly string[]): string[] {
  const lines: string[] = [];
  let line = prefix;
  for (const word of words) {
    if (line.length + word.length + 1 > 100 && line.trim() !== prefix.trim()) {
      lines.push(line.trimEnd());
      line = ' '.repeat(prefix.length);
    }
    line += `${word} `;
  }
  return [...lines, line.trimEnd()];
}

/** Where the generated reference sits in docs/cli.md. */
export const REFERENCE_START = '<!-- cli-reference: made from the flag definitions in cli/ by `npm run docs:cli`; do not edit by hand -->';
export const REFERENCE_END = '<!-- /cli-reference -->';

/**
 * The CLI reference in docs/cli.md, made from the same flag definitions as the parser and each
 * `--help` (`npm run docs:cli` writes it; test/unit/cli-reference.test.ts fails when it is stale).
 */
export function cliReference(): string {
  const synopsis = COMMANDS.flatMap((c) => wrap(`troupe ${c.name.padEnd(7)}`, synopsisOf(c.args, c.flags)));
  const sections = COMMANDS.map((c) => `### troupe ${c.name}\n\n${c.summary}.\n\n\`\`\`text\n${c.help.trimEnd()}\n\`\`\``);
  return [
    '```text',
    ...synopsis,
    'troupe --help (and troupe <command> --help)',
    '```',
    '',
    `Every command also takes \`--${LOG_FORMAT_FLAG.name} ${LOG_FORMAT_FLAG.value}\`: ${LOG_FORMAT_FLAG.help.replace(/\n/g, ' ')}.`,
    '',
    ...sections.flatMap((s) => [s, '']),
  ]
    .join('\n')
    .trimEnd();
}
