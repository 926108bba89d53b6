import { readFile } from 'node:fs/promises';

export interface ProcessUsage {
  pid: number;
  /** Resident memory, bytes. */
  rssBytes: number;
  /** User + system CPU time since the process started, seconds. */
  cpuSeconds: number;
}

// Linux reports CPU times in clock ticks; 100 per second on every mainstream kernel config.
const TICKS_PER_SECOND = 100;
const PAGE_BYTES = 4096;

/**
 * CPU time and RSS of a process from /proc, without a dependency or a child process. Returns null
 * where /proc is missing (not Linux) or the process is gone.
 */
export async function processUsage(pid: number): Promise<ProcessUsage | null> {
  try {
    const [stat, statm] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/statm`, 'utf8')]);
    // Fields after the command name (which may contain spaces) start at the state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    const residentPages = Number(statm.split(' ')[1]);
    if (!Number.isFinite(utime + stime + residentPages)) return null;
    return { pid, rssBytes: residentPages * PAGE_BYTES, cpuSeconds: (utime + stime) / TICKS_PER_SECOND };
  } catch {
    return null;
  }
}
