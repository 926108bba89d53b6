import { readFile, readdir } from 'node:fs/promises';

/** Pids of the processes whose parent is `parent` and whose command line contains `marker`, read from /proc. */
export async function childrenRunning(parent: number, marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // Fields after the command name (which may hold spaces): state, then the parent pid.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid !== parent) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(marker)) found.push(Number(entry));
  }
  return found;
}

/** Pids of every process in a process group, read from /proc (field 5 of stat is the pgid). */
export async function groupMembers(pgid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && Number(fields[2]) === pgid) pids.push(Number(entry));
  }
  return pids;
}
