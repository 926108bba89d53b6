import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { TroupeError } from './errors.js';

/**
 * Resolves a model path inside a folder: the agent's model directory for a deployment's model,
 * a graph file's own folder for the models it names. Anything that would land outside it (`../x`,
 * an absolute path elsewhere, a symlink inside that leads out) is refused: a deploy request must
 * not be able to make an agent or actor open arbitrary files.
 */
export async function resolveModelPath(modelDir: string, path: string, folder = "the agent's model directory"): Promise<string> {
  const root = resolve(modelDir);
  const full = resolve(root, path);
  const rel = relative(root, full);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${path}' is outside ${folder} ${root}`);
  }
  const info = await stat(full).catch(() => undefined);
  if (!info?.isFile()) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model '${path}' not found in ${folder} ${root}`);
  }
  const realRoot = await realpath(root).catch(() => root);
  const real = await realpath(full).catch(() => full);
  const realRel = relative(realRoot, real);
  if (realRel === '' || realRel.startsWith('..') || isAbsolute(realRel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${path}' links outside ${folder} ${root}`);
  }
  return full;
}
