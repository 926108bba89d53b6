import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PACKAGES, pack } from '../helpers/packages.js';
import type { PackResult } from '../helpers/packages.js';

interface Manifest {
  name: string;
  version: string;
  exports: Record<string, string | { types?: string; default: string }>;
  types?: string;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  publishConfig?: { access?: string };
}

/** What no published file may be: tests, benchmarks, sources, maps, build records. */
const NOT_SHIPPED = [/(^|\/)test\//, /(^|\/)bench\//, /\.map$/, /\.tsbuildinfo$/, /(?<!\.d)\.ts$/, /\.c$/, /\.recipe$/, /(^|\/)\.[^/]+$/];
/**
 * No published file is larger (the server's largest today: a protocol's declarations, 37 KB), but
 * the client's bundle: the SDK with the parts of zod, msgpackr and nanoid it uses in one module (0.46 MB).
 */
const FILE_BOUND = 256_000;
const BUNDLE_BOUND = 600_000;
/** Nor a package, unpacked (the server package: 2.1 MB today; the client 0.5 MB). */
const PACKAGE_BOUND = { troupe: 4_000_000, '@troupe/client': 1_000_000 } as Record<string, number>;
/** All the client publishes: one module, its declarations, and what npm and its readers need. */
const CLIENT_FILES = ['CHANGELOG.md', 'README.md', 'dist/index.d.ts', 'dist/index.js', 'package.json'];

describe('what `npm publish` would publish: each package ships what runs and nothing else', { timeout: 180_000 }, () => {
  let logs: string;
  const packed = new Map<string, { manifest: Manifest; result: PackResult }>();

  before(async () => {
    logs = await mkdtemp(join(tmpdir(), 'troupe-pack-'));
    for (const { name, dir } of PACKAGES) {
      const manifest = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as Manifest;
      packed.set(name, { manifest, result: await pack(dir, logs) });
    }
  });
  after(async () => {
    if (logs) await rm(logs, { recursive: true, force: true });
  });

  for (const { name } of PACKAGES) {
    test(`${name}: README, CHANGELOG, types and exports, every file they name, and no test, benchmark, source or map`, () => {
      const { manifest, result } = packed.get(name)!;
      const files = new Set(result.files.map((f) => f.path));
      // Listed for whoever reads a CI log: what this package publishes, by folder.
      const byFolder = new Map<string, number>();
      for (const f of result.files) {
        const folder = f.path.split('/').slice(0, 2).join('/');
        byFolder.set(folder, (byFolder.get(folder) ?? 0) + f.size);
      }
      console.log(
        `${name}: ${result.files.length} files, ${result.unpackedSize} bytes: ${[...byFolder].map(([f, b]) => `${f} ${b}`).join(', ')}`,
      );

      for (const required of ['package.json', 'README.md', 'CHANGELOG.md']) assert.ok(files.has(required), `${name} publishes ${required}`);
      assert.deepEqual(
        result.files.filter((f) => NOT_SHIPPED.some((pattern) => pattern.test(f.path))).map((f) => f.path),
        [],
      );
      const bundle = name === '@troupe/client' ? 'dist/index.js' : undefined;
      assert.deepEqual(
        result.files.filter((f) => f.size > (f.path === bundle ? BUNDLE_BOUND : FILE_BOUND)).map((f) => `${f.path} (${f.size} bytes)`),
        [],
      );
      if (name === '@troupe/client') assert.deepEqual([...files].sort(), CLIENT_FILES);
      assert.ok(result.unpackedSize < PACKAGE_BOUND[name]!, `${name} unpacks to ${result.unpackedSize} bytes`);

      // Every entry point resolves to a published file, its types too.
      const named = [manifest.types, ...Object.values(manifest.bin ?? {})];
      for (const target of Object.values(manifest.exports)) {
        if (typeof target === 'string') named.push(target);
        else {
          assert.ok(target.types, `${name}: each export has its types`);
          named.push(target.types, target.default);
        }
      }
      for (const path of named) if (path !== undefined) assert.ok(files.has(path.replace(/^\.\//, '')), `${name} publishes ${path}`);
    });
  }

  test('the client depends on what a client needs, and the server package on the client at its own version', () => {
    const client = packed.get('@troupe/client')!.manifest;
    const server = packed.get('troupe')!.manifest;
    // zod, msgpackr and nanoid are inlined in its bundle (devDependencies: what its build takes in).
    assert.deepEqual(Object.keys(client.dependencies ?? {}), ['ws']);
    assert.equal(server.dependencies?.['@troupe/client'], client.version);
    // The two packages are versioned together: the server's entry re-exports this client.
    assert.equal(server.version, client.version);
    // A scoped package is published restricted unless it says otherwise.
    assert.equal(client.publishConfig?.access, 'public');
  });
});
