import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { TroupeError } from '../runtime/index.js';

/**
 * Resolves a deployment's model path inside the agent's model directory. Anything that would
 * land outside it (`../x`, an absolute path elsewhere, a symlink inside that leads out) is
 * refused: a deploy request must not be able to make an agent open arbitrary files.
 */
export async function resolveModelPath(modelDir: string, path: string): Promise<string> {
  const root = resolve(modelDir);
  const full = resolve(root, path);
  const rel = relative(root, full);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${path}' is outside the agent's model directory ${root}`);
  }
  const info = await stat(full).catch(() => undefined);
  if (!info?.isFile()) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model '${path}' not found in the agent's model directory ${root}`);
  }
  const realRoot = await realpath(root).catch(() => root);
  const real = await realpath(full).catch(() => full);
  const realRel = relative(realRoot, real);
  if (realRel === '' || realRel.startsWith('..') || isAbsolute(realRel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${path}' links outside the agent's model directory ${root}`);
  }
  return full;
}
