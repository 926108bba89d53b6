import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { COMMANDS } from '../../cli/commands.js';
import { REFERENCE_END, REFERENCE_START, cliReference } from '../../cli/reference.js';

const camel = (kebab: string) => kebab.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

describe('CLI reference: one definition of each flag', () => {
  test("docs/cli.md's reference is the one the flag definitions make (npm run docs:cli rewrites it)", async () => {
    const page = await readFile(new URL('../../../docs/cli.md', import.meta.url), 'utf8');
    const start = page.indexOf(REFERENCE_START);
    const end = page.indexOf(REFERENCE_END);
    assert.ok(start >= 0 && end > start, 'docs/cli.md holds the reference markers');
    const shown = page.slice(start + REFERENCE_START.length, end).trim();
    assert.equal(shown, cliReference(), 'docs/cli.md is stale: run `npm run docs:cli`');
  });

  for (const command of COMMANDS) {
    test(`troupe ${command.name}: the parser's schema takes exactly the flags --help and the docs show`, () => {
      assert.deepEqual(Object.keys(command.schema.shape).sort(), command.flags.map((f) => camel(f.name)).sort());
      for (const flag of command.flags.filter((f) => !f.hidden)) {
        assert.match(command.help, new RegExp(`^  --${flag.name}\\b`, 'm'), `--${flag.name} is in troupe ${command.name} --help`);
        assert.ok(cliReference().includes(`--${flag.name}`), `--${flag.name} is in docs/cli.md`);
      }
    });
  }
});
