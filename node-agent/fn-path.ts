import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { TroupeError } from '../runtime/internal.js';

export interface FnModule {
  /** Absolute path of the module file, inside the module directory (for the actor, never for callers). */
  path: string;
  exportName: string;
}

/** `full` relative to `root` when it lies strictly inside it; undefined when it leads out. */
function inside(root: string, full: string): string | undefined {
  const rel = relative(root, full);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel) ? rel : undefined;
}

/**
 * Installed packages and dot-folders (`.git`, `.troupe`, `.agent-*`) are never fn modules: a
 * package's exports are not steps anyone chose to offer, and dot-folders hold hooks, state and
 * caches whose top-level code must not run because a deploy named it.
 */
function hiddenPart(rel: string): string | undefined {
  return rel.split(sep).find((part) => part === 'node_modules' || part.startsWith('.'));
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

/**
 * Resolves a fn step's `path#export` inside the agent's module directory. fn steps are opt-in
 * code: an agent without `--module-dir` runs none. Only modules already in that directory can
 * run, never one outside it (`../x`, absolute paths, symlinks that lead out: checked on the
 * realpath), in `node_modules/` or in a dot-folder. A `.ts` name resolves to the compiled `.js`
 * beside it when only that exists, since Node runs JavaScript. Messages name the path as the
 * caller gave it, never the agent's directory: callers need not learn the agent's filesystem.
 */
export async function resolveFnRef(moduleDir: string | undefined, ref: string, kind: 'fn' | 'class' = 'fn'): Promise<FnModule> {
  // A class actor's module is resolved by the same rules; its messages say which it is.
  const [what, users] = kind === 'class' ? ['class module', 'class actors'] : ['fn module', 'fn steps'];
  if (!moduleDir) {
    throw new TroupeError(
      'TROUPE_ERR_NO_MODULE_DIR',
      `${kind} '${ref.slice(0, 200)}' refused: this agent has no module directory, so it runs no ${users} (start it with --module-dir DIR to offer the modules in DIR)`,
    );
  }
  const hash = ref.lastIndexOf('#');
  const file = hash > 0 ? ref.slice(0, hash) : '';
  const exportName = hash > 0 ? ref.slice(hash + 1) : '';
  if (!file || !/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(exportName)) {
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `${kind} reference '${ref.slice(0, 200)}' is not 'path/to/module.js#exportName'`);
  }
  const shown = file.slice(0, 200);
  // Named relative to the module directory only, as docs/security.md says: an absolute path
  // inside it was accepted, and would tell a caller where the agent keeps its code.
  if (isAbsolute(file) || /^[A-Za-z]:[\\/]/.test(file))
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `fn module '${shown}' is an absolute path: name it relative to the agent's module directory (e.g. 'steps/prep.js#prep')`,
    );
  const root = await realpath(resolve(moduleDir)).catch(() => resolve(moduleDir));
  let full = resolve(root, file);
  const rel = inside(root, full);
  if (rel === undefined) throw new TroupeError('TROUPE_ERR_MODEL_PATH', `${what} '${shown}' is outside the agent's module directory`);
  const hidden = hiddenPart(rel);
  if (hidden)
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `${what} '${shown}' is in '${hidden}', which ${users} may not use (node_modules/ and dot-folders are refused)`,
    );
  if (!(await isFile(full)) && /\.[mc]?ts$/.test(full)) {
    const compiled = full.replace(/\.([mc]?)ts$/, '.$1js');
    if (await isFile(compiled)) full = compiled;
  }
  if (!(await isFile(full))) throw new TroupeError('TROUPE_ERR_MODEL_PATH', `${what} '${shown}' not found in the agent's module directory`);
  // A symlink inside the directory must not lead outside it, nor into a place refused above.
  const real = await realpath(full);
  const realRel = inside(root, real);
  if (realRel === undefined)
    throw new TroupeError('TROUPE_ERR_MODEL_PATH', `${what} '${shown}' links outside the agent's module directory`);
  if (hiddenPart(realRel))
    throw new TroupeError(
      'TROUPE_ERR_MODEL_PATH',
      `${what} '${shown}' links into node_modules/ or a dot-folder, which ${users} may not use`,
    );
  return { path: real, exportName };
}
