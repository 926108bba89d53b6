import { mkdir, readFile, readdir, rename, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface RunningActor {
  actorId: string;
  pid: number;
}

/** Whether a process with this pid exists (EPERM: it does, and is another user's). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function environOf(pid: number): Promise<string> {
  return readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
}

/**
 * Whether the process's parent is a live node agent. Then it is not an orphan: another agent with
 * the same name and state directory (two `troupe up` in one folder, parallel tests) still runs it.
 */
async function parentIsLiveAgent(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  if (!Number.isInteger(ppid) || ppid <= 1) return false;
  const cmdline = await readFile(`/proc/${ppid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.split('\0').includes('agent');
}

/**
 * The actors an agent runs, kept in a file so that the next run of the same agent can find and
 * kill any that outlived it (an actor stuck in a driver call can miss its parent's exit and keep
 * holding GPU memory). A pid counts only if that process still carries the actor's id in its
 * environment (so a recycled pid is never killed) and no live agent is its parent.
 */
export class ActorLedger {
  readonly #file: string;
  #writing: Promise<void> = Promise.resolve();

  constructor(file: string) {
    this.#file = file;
  }

  /** Replaces the ledger with `actors` (writes are serialised and atomic: temp file + rename). */
  record(actors: RunningActor[]): Promise<void> {
    const body = JSON.stringify(actors);
    this.#writing = this.#writing
      .then(async () => {
        await mkdir(dirname(this.#file), { recursive: true });
        const temp = `${this.#file}.${process.pid}.tmp`;
        await writeFile(temp, body);
        await rename(temp, this.#file);
      })
      .catch(() => {});
    return this.#writing;
  }

  /** Kills live actors left by an earlier run; returns their pids. */
  async killOrphans(): Promise<number[]> {
    await this.#removeStaleTemps();
    let listed: RunningActor[];
    try {
      listed = JSON.parse(await readFile(this.#file, 'utf8')) as RunningActor[];
    } catch {
      return [];
    }
    const killed: number[] = [];
    for (const { actorId, pid } of Array.isArray(listed) ? listed : []) {
      if (typeof pid !== 'number' || typeof actorId !== 'string') continue;
      if (!(await environOf(pid)).split('\0').includes(`TROUPE_ACTOR_ID=${actorId}`)) continue;
      if (await parentIsLiveAgent(pid)) continue;
      try {
        process.kill(pid, 'SIGKILL');
        killed.push(pid);
      } catch {
        // Gone between the check and the kill: nothing to do.
      }
    }
    await this.record([]);
    return killed;
  }

  /** Temp files of writes that an earlier run, killed mid-write, never renamed into place. */
  async #removeStaleTemps(): Promise<void> {
    const dir = dirname(this.#file);
    const prefix = `${basename(this.#file)}.`;
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      const pid = Number(name.slice(prefix.length, -'.tmp'.length));
      if (!name.startsWith(prefix) || !name.endsWith('.tmp') || !Number.isInteger(pid) || isRunning(pid)) continue;
      await unlink(join(dir, name)).catch(() => {});
    }
  }
}
