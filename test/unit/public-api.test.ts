import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as sdk from '../../runtime/index.js';

/** The SDK's values, all of them: adding one is a decision, so it is made here too (docs/sdk.md). */
const PUBLIC_VALUES = [
  'ActorHandle',
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
  assert.deepEqual(Object.keys(pkg.exports).sort(), ['.', './models']);
  // The package imports itself by name, as a user's code would (Node's self-reference).
  const viaName = (await import(pkg.name)) as Record<string, unknown>;
  assert.equal(typeof viaName.connect, 'function');
  await assert.rejects(
    import(`${pkg.name}/dist/runtime/internal.js`),
    (err: NodeJS.ErrnoException) => err.code === 'ERR_PACKAGE_PATH_NOT_EXPORTED',
  );
});
