import { link, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { TroupeError, newId } from '../../runtime/internal.js';

/**
 * One head per data directory. Two heads on one `state.json` overwrite each other's state and
 * both adopt the same actors, so a head that persists its state first takes `<dataDir>/head.lock`:
 * created exclusively, holding the owner's pid. A lock whose pid is not alive is stale (a head that
 * was killed) and is taken over; a clean close removes it.
 *
 * The pid is judged on this host only: a data directory shared between hosts is not protected.
 * A lock holding this process's own pid is a previous life of this pid (a container restarted
 * with the same pid), unless this process holds it now (two in-process heads, as in tests).
 */

const LOCK_FILE = 'head.lock';

/** Data directories locked by this process, so a second in-process head on one is refused too. */
const heldHere = new Set<string>();

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock if it is still this process's; idempotent. */
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const readPid = async (file: string): Promise<number | undefined> => {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  const pid = Number.parseInt(text ?? '', 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
};

function locked(dir: string, pid: number): TroupeError {
  return new TroupeError(
    'TROUPE_ERR_DATA_DIR_LOCKED',
    `another head (pid ${pid}) is using the data directory ${dir}; stop it, or give this head another --data-dir`,
  );
}

/** Takes the lock of `dir` (an absolute path), or throws TROUPE_ERR_DATA_DIR_LOCKED naming its owner. */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const file = join(dir, LOCK_FILE);
  if (heldHere.has(dir)) throw locked(dir, process.pid);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(`${process.pid}\n`);
      } finally {
        await handle.close();
      }
      heldHere.add(dir);
      return { file, release: () => release(dir, file) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = await readPid(file);
    // A lock being written has no pid yet: give its writer a moment.
    if (owner === undefined && attempt < 2) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      continue;
    }
    if (owner !== undefined && owner !== process.pid && alive(owner)) throw locked(dir, owner);
    await takeOver(file, owner);
  }
  throw new TroupeError('TROUPE_ERR_DATA_DIR_LOCKED', `could not take the lock ${file}: other heads keep taking it`);
}

/**
 * Moves a stale lock aside. Renaming (not deleting) is what makes two heads that both found the
 * same stale lock safe: only one rename moves it, and one that moved a lock another head had just
 * made (its pid is not the stale one) puts it back.
 */
async function takeOver(file: string, stalePid: number | undefined): Promise<void> {
  const aside = `${file}.${newId()}.stale`;
  try {
    await rename(file, aside);
  } catch {
    return; // Moved by another head already: look again.
  }
  if ((await readPid(aside)) !== stalePid) await link(aside, file).catch(() => {});
  await rm(aside, { force: true });
}

async function release(dir: string, file: string): Promise<void> {
  if (!heldHere.delete(dir)) return;
  if ((await readPid(file)) === process.pid) await rm(file, { force: true });
}
