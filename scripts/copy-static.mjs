// Build step after tsc: copies files tsc does not emit (the status page's HTML and CSS) into dist/,
// so `npm run build` from a clean clone produces everything the head serves. Plain node, no shell.
import { cpSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const copies = [['head/status/static', 'dist/head/status/static']];

for (const [from, to] of copies) {
  rmSync(join(root, to), { recursive: true, force: true });
  cpSync(join(root, from), join(root, to), { recursive: true });
}
