import { readdir, readFile } from 'node:fs/promises';

/** Every live pid with its parent, from /proc (Linux). */
async function parents(): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields after its last ')' are fixed.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(entry), ppid);
    } catch {
      // Exited while being read.
    }
  }
  return out;
}

/** The pids of `roots` and all their descendants that are alive now. */
export async function processTree(roots: number[]): Promise<number[]> {
  const ppid = await parents();
  const tree = new Set(roots.filter((pid) => ppid.has(pid)));
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, parent] of ppid)
      if (!tree.has(pid) && tree.has(parent)) {
        tree.add(pid);
        grew = true;
      }
  }
  return [...tree];
}

/** Resident memory (VmRSS) of `roots` and all their descendants, in bytes, and how many processes. */
export async function treeRss(roots: number[]): Promise<{ bytes: number; processes: number }> {
  let bytes = 0;
  const pids = await processTree(roots);
  for (const pid of pids) {
    try {
      const kib = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1];
      bytes += Number(kib ?? 0) * 1024;
    } catch {
      // Exited while being read.
    }
  }
  return { bytes, processes: pids.length };
}
