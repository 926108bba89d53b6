import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { resolveFnRef } from '../../node-agent/fn-path.js';

let root: string;
let dir: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'troupe-fn-path-'));
  dir = join(root, 'modules');
  await mkdir(join(dir, 'steps'), { recursive: true });
  await writeFile(join(dir, 'steps', 'prep.js'), 'export const prep = () => ({});');
  await writeFile(join(root, 'outside.js'), 'export const x = 1;');
  await symlink(join(root, 'outside.js'), join(dir, 'link.js'));
  for (const hidden of ['node_modules/pkg', '.git/hooks']) {
    await mkdir(join(dir, hidden), { recursive: true });
    await writeFile(join(dir, hidden, 'index.js'), 'export const x = () => ({});');
  }
  await symlink(join(dir, 'node_modules', 'pkg', 'index.js'), join(dir, 'steps', 'pkg.js'));
});
after(() => rm(root, { recursive: true, force: true }));

test('a module inside the module directory resolves, .ts to the compiled .js beside it', async () => {
  assert.deepEqual(await resolveFnRef(dir, 'steps/prep.js#prep'), { path: join(dir, 'steps', 'prep.js'), exportName: 'prep' });
  assert.equal((await resolveFnRef(dir, 'steps/prep.ts#prep')).path, join(dir, 'steps', 'prep.js'));
});

test('anything that leads outside the directory is refused with TROUPE_ERR_MODEL_PATH', async () => {
  const refused = (ref: string, message: RegExp) =>
    assert.rejects(
      resolveFnRef(dir, ref),
      (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_MODEL_PATH' && message.test(err.message),
    );
  await refused('../outside.js#x', /^fn module '..\/outside.js' is outside the agent's module directory$/);
  await refused(`${join(root, 'outside.js')}#x`, /is an absolute path: name it relative to the agent's module directory/);
  // Absolute paths are refused even inside the directory (docs/security.md).
  await refused(`${join(dir, 'steps', 'prep.js')}#prep`, /is an absolute path/);
  await refused('link.js#x', /links outside the agent's module directory/);
  await refused('steps/missing.js#x', /not found/);
  await refused('steps/prep.js', /is not 'path\/to\/module.js#exportName'/);
  await refused('steps/prep.js#not-an-identifier', /is not 'path\/to\/module.js#exportName'/);
  await refused('node_modules/pkg/index.js#x', /is in 'node_modules', which fn steps may not use/);
  await refused('.git/hooks/index.js#x', /is in '.git'/);
  await refused('steps/../.git/hooks/index.js#x', /is in '.git'/);
  await refused('steps/pkg.js#x', /links into node_modules\/ or a dot-folder/);
});

test('messages never name the module directory', async () => {
  for (const ref of ['../outside.js#x', 'link.js#x', 'steps/missing.js#x', 'node_modules/pkg/index.js#x']) {
    await assert.rejects(resolveFnRef(dir, ref), (err: Error) => !err.message.includes(root));
  }
});

test('an agent without a module directory runs no fn steps: TROUPE_ERR_NO_MODULE_DIR', async () => {
  await assert.rejects(
    resolveFnRef(undefined, 'steps/prep.js#prep'),
    (err: Error & { code?: string }) =>
      err.code === 'TROUPE_ERR_NO_MODULE_DIR' && /no module directory.*--module-dir DIR/.test(err.message),
  );
});

test("a class actor's module is called a class module in what goes wrong", async () => {
  await assert.rejects(resolveFnRef(dir, 'greeter.js#Greeter', 'class'), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'TROUPE_ERR_MODEL_PATH');
    assert.equal(err.message, "class module 'greeter.js' not found in the agent's module directory");
    return true;
  });
  await assert.rejects(resolveFnRef(undefined, 'greeter.js#Greeter', 'class'), /runs no class actors/);
});
