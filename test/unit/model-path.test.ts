import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { TroupeError, resolveModelPath } from '../../runtime/internal.js';
import { withShownPath } from '../../runtime/model-path.js';

let root: string;
let dir: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'troupe-model-path-'));
  dir = join(root, 'models');
  await mkdir(join(dir, 'sub'), { recursive: true });
  await writeFile(join(dir, 'sub', 'm.onnx'), 'x');
  await writeFile(join(root, 'secret.onnx'), 'x');
  await symlink(join(root, 'secret.onnx'), join(dir, 'link.onnx'));
  await symlink(join(dir, 'sub', 'm.onnx'), join(dir, 'inside.onnx'));
});
after(() => rm(root, { recursive: true, force: true }));

test('a model inside the model directory resolves, also through a symlink that stays inside', async () => {
  assert.equal(await resolveModelPath(dir, 'sub/m.onnx'), join(dir, 'sub', 'm.onnx'));
  assert.equal(await resolveModelPath(dir, 'inside.onnx'), join(dir, 'inside.onnx'));
});

test('paths and symlinks that lead outside the model directory are refused with TROUPE_ERR_MODEL_PATH', async () => {
  const refused = (path: string, message: RegExp) =>
    assert.rejects(
      resolveModelPath(dir, path),
      (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_MODEL_PATH' && message.test(err.message),
    );
  await refused('../secret.onnx', /is outside the agent's model directory/);
  await refused(join(root, 'secret.onnx'), /is outside/);
  await refused('sub/../../secret.onnx', /is outside/);
  await refused('link.onnx', /links outside the agent's model directory/);
  await refused('.', /is outside/);
  await refused('missing.onnx', /not found/);
});

test("refusals name the path as given, never the directory; withShownPath hides an actor's absolute path", async () => {
  for (const path of ['../secret.onnx', 'link.onnx', 'missing.onnx']) {
    await assert.rejects(resolveModelPath(dir, path), (err: Error) => !err.message.includes(root));
  }
  const full = join(dir, 'sub', 'm.onnx');
  const err = new TroupeError(
    'TROUPE_ERR_MODEL_LOAD',
    `cannot load '${full}': Load model from ${full} failed, member ${join(dir, 'sub', 'a.onnx')}`,
  );
  const shown = withShownPath(err, full, 'sub/m.onnx');
  assert.equal(shown.code, 'TROUPE_ERR_MODEL_LOAD');
  assert.equal(shown.message, "cannot load 'sub/m.onnx': Load model from sub/m.onnx failed, member sub/a.onnx");
  assert.equal(withShownPath(err, full, undefined), err);
});
