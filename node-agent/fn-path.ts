import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { TroupeError } from '../runtime/index.js';

export interface FnModule {
  /** Absolute path of the module file, inside the module directory. */
  path: string;
  exportName: string;
}

function inside(root: string, full: string): boolean {
  const rel = relative(root, full);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

/**
 * Resolves a fn step's `path#export` inside the agent's module directory. Only modules already
 * on the agent can run, and nothing outside that directory (`../x`, absolute paths, symlinks
 * that lead out) is ever imported: a deploy request must not choose arbitrary code. A `.ts` name
 * resolves to the compiled `.js` beside it when only that exists, since Node runs JavaScript.
 */
export async function resolveFnRef(moduleDir: string, ref: string): Promise<FnModule> {
  const hash = ref.lastIndexOf('#');
  const file = hash > 0 ? ref.slice(0, hash) : '';
  const exportName = hash > 0 ? ref.slice(hash + 1) : '';
  if (!file || !/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(exportName)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `fn reference '${ref}' is not 'path/to/module.js#exportName'`);
  }
  const root = await realpath(resolve(moduleDir)).catch(() => resolve(moduleDir));
  let full = resolve(root, file);
  if (!inside(root, full)) throw new TroupeError('TROUPE_ERR_MODEL_PATH', `fn module '${file}' is outside the agent's module directory ${root}`);
  if (!(await isFile(full)) && /\.[mc]?ts$/.test(full)) {
    const compiled = full.replace(/\.([mc]?)ts$/, '.$1js');
    if (await isFile(compiled)) full = compiled;
  }
  if (!(await isFile(full))) throw new TroupeError('TROUPE_ERR_MODEL_PATH', `fn module '${file}' not found in the agent's module directory ${root}`);
  // A symlink inside the directory must not lead outside it.
  const real = await realpath(full);
  if (!inside(root, real)) throw new TroupeError('TROUPE_ERR_MODEL_PATH', `fn module '${file}' links outside the agent's module directory ${root}`);
  return { path: real, exportName };
}
