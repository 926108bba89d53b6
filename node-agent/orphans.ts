import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface RunningActor {
  actorId: string;
  pid: number;
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
}
