// Writes the CLI reference into docs/cli.md, between its markers, from the compiled flag
// definitions (dist/cli/reference.js): `npm run docs:cli`. test/unit/cli-reference.test.ts
// fails when the page and the definitions differ.
import { readFile, writeFile } from 'node:fs/promises';

const { REFERENCE_END, REFERENCE_START, cliReference } = await import('../dist/cli/reference.js');
const page = new URL('../docs/cli.md', import.meta.url);
const text = await readFile(page, 'utf8');
const start = text.indexOf(REFERENCE_START);
const end = text.indexOf(REFERENCE_END);
if (start < 0 || end < start) throw new Error(`docs/cli.md has no ${REFERENCE_START} ... ${REFERENCE_END} block`);
const next = `${text.slice(0, start)}${REFERENCE_START}\n${cliReference()}\n${text.slice(end)}`;
if (next !== text) await writeFile(page, next);
process.stdout.write(next === text ? 'docs/cli.md is up to date\n' : 'docs/cli.md: CLI reference rewritten\n');
