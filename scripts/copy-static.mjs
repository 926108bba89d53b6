// Build step after tsc: copies files tsc does not emit (the status page's HTML and CSS, the gRPC .proto files) into dist/,
// so `npm run build` from a clean clone produces everything the head serves, and marks the CLI
// executable (tsc writes it 644; `npx troupe` runs the bin's file itself). Plain node, no shell.
// A file whose copy is already there, as large and no older, is left alone, and a copy whose
// source is gone is removed: an unchanged tree costs a few stat calls (`npm run example:*`
// builds first, and should start at once when nothing changed).
import { chmodSync, copyFileSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const copies = [
  ['head/status/static', 'dist/head/status/static'],
  // The gRPC service's .proto files, which the head loads at start (head/grpc/service-definition.ts).
  ['proto', 'dist/proto'],
];

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir) {
  const found = [];
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else found.push(relative(dir, path));
    }
  };
  walk(dir);
  return found;
}

const stale = (from, to) => {
  const source = statSync(from);
  const copy = statSync(to, { throwIfNoEntry: false });
  return !copy || copy.size !== source.size || copy.mtimeMs < source.mtimeMs;
};

for (const [from, to] of copies) {
  const source = join(root, from);
  const target = join(root, to);
  const wanted = new Set(filesUnder(source));
  mkdirSync(target, { recursive: true });
  for (const file of filesUnder(target)) if (!wanted.has(file)) rmSync(join(target, file), { force: true });
  for (const file of wanted) {
    if (!stale(join(source, file), join(target, file))) continue;
    mkdirSync(dirname(join(target, file)), { recursive: true });
    copyFileSync(join(source, file), join(target, file));
  }
}

chmodSync(join(root, 'dist', 'cli', 'main.js'), 0o755);
