import { realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { TroupeError } from './errors.js';

/**
 * Resolves a model path inside a folder: the agent's model directory for a deployment's model,
 * a graph file's own folder for the models it names. Anything that would land outside it (`../x`,
 * an absolute path elsewhere, a symlink inside that leads out) is refused: a deploy request must
 * not be able to make an agent or actor open arbitrary files. Messages name the path as the caller
 * gave it and the folder by role, never its absolute path: a caller need not learn the agent's
 * filesystem (the agent logs the absolute path).
 */
export async function resolveModelPath(
  modelDir: string,
  path: string,
  folder = "the agent's model directory",
  want: 'file' | 'directory' = 'file',
): Promise<string> {
  const root = resolve(modelDir);
  const full = resolve(root, path);
  const shown = path.slice(0, 200);
  const rel = relative(root, full);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${shown}' is outside ${folder}`);
  }
  const info = await stat(full).catch(() => undefined);
  if (want === 'file' ? !info?.isFile() : !info?.isDirectory()) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model ${want === 'file' ? '' : 'directory '}'${shown}' not found in ${folder}`);
  }
  const realRoot = await realpath(root).catch(() => root);
  const real = await realpath(full).catch(() => full);
  const realRel = relative(realRoot, real);
  if (realRel === '' || realRel.startsWith('..') || isAbsolute(realRel)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `model path '${shown}' links outside ${folder}`);
  }
  return full;
}

/**
 * The same error with every mention of `absolute` (the file an actor was given) replaced by
 * `shown` (the path or reference the deploy named), and of its folder by the folder as named:
 * onnxruntime and import() put absolute paths into their messages (a graph's members too), and
 * those reach the caller of a deploy.
 */
export function withShownPath(err: TroupeError, absolute: string, shown: string | undefined): TroupeError {
  if (!shown) return err;
  const shownDir = dirname(shown) === '.' ? '' : `${dirname(shown)}/`;
  const message = err.message
    .split(absolute)
    .join(shown)
    .split(dirname(absolute) + sep)
    .join(shownDir);
  return message === err.message ? err : new TroupeError(err.code, message);
}
