import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import * as sdk from '../../runtime/index.js';

/** The SDK's values, all of them: adding one is a decision, so it is made here too (docs/sdk.md). */
const PUBLIC_VALUES = [
  'ActorHandle',
  'ActorReference',
  'ActorStream',
  'CallFuture',
  'Cluster',
  'ERRORS',
  'ERROR_CODES',
  'Future',
  'FutureOutput',
  'TroupeError',
  'connect',
  'dataParallel',
  'ensemble',
  'fn',
  'method',
  'model',
  'pipeline',
  'tensor',
  'wait',
];

test('the SDK exports exactly its public values', () => {
  assert.deepEqual(Object.keys(sdk).sort(), [...PUBLIC_VALUES].sort());
});

test("docs/sdk.md's 'whole public surface' names every public value", () => {
  const page = readFileSync(new URL('../../../docs/sdk.md', import.meta.url), 'utf8');
  const surface = /\*\*The whole public surface\*\*([\s\S]*?)Everything else/.exec(page)?.[1];
  assert.ok(surface, "docs/sdk.md has its 'whole public surface' paragraph");
  assert.deepEqual(
    PUBLIC_VALUES.filter((name) => !surface.includes(`\`${name}\``)),
    [],
  );
});

test("users reach the SDK as 'troupe' and cannot import the internal entry", async () => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    name: string;
    exports: Record<string, string>;
  };
  // The SDK, the example models, and the shared-memory addon for a client package installed beside it.
  assert.deepEqual(Object.keys(pkg.exports).sort(), ['.', './models', './native/troupe_shm.node']);
  // The package imports itself by name, as a user's code would (Node's self-reference).
  const viaName = (await import(pkg.name)) as Record<string, unknown>;
  assert.equal(typeof viaName.connect, 'function');
  // 'troupe' is the client package re-exported: the same functions and classes, not a copy.
  const client = (await import('@troupe/client')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(viaName).sort(), Object.keys(client).sort());
  for (const name of Object.keys(client)) assert.equal(viaName[name], client[name], name);
  // The client is one bundled module (scripts/bundle-client.mjs): its classes and functions keep
  // the names this build gives them (a bundler renames a class that refers to itself), so an
  // error prints as a TroupeError and a stack names the SDK's own functions.
  for (const name of PUBLIC_VALUES) {
    const own = (sdk as Record<string, unknown>)[name];
    if (typeof own === 'function') assert.equal((client[name] as () => unknown).name, own.name, name);
  }
  await assert.rejects(
    import(`${pkg.name}/dist/runtime/internal.js`),
    (err: NodeJS.ErrnoException) => err.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED',
  );
});

test("a project that type-checks its libraries (skipLibCheck false) imports 'troupe' and 'troupe/models' cleanly", async () => {
  const repo = fileURLToPath(new URL('../../../', import.meta.url));
  const dir = await mkdtemp(join(tmpdir(), 'troupe-types-'));
  try {
    // As an installed package: node_modules/troupe is this repository (its package.json exports and dist/).
    await mkdir(join(dir, 'node_modules'));
    await symlink(repo, join(dir, 'node_modules', 'troupe'), 'dir');
    await writeFile(
      join(dir, 'check.ts'),
      "import { connect } from 'troupe';\nimport { buildMlp, decodeModel } from 'troupe/models';\nexport const used = [connect, buildMlp, decodeModel];\n",
    );
    const config = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [join(repo, 'node_modules', '@types')],
      },
      files: ['check.ts'],
    };
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(config));
    const tsc = spawnSync(process.execPath, [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(tsc.status, 0, `tsc found errors:\n${tsc.stdout}${tsc.stderr}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
