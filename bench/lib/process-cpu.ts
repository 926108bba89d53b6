import { readFileSync, readdirSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

function statFields(pid: number): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces: the fields that follow start after its ')'.
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** CPU time (user + system, ms) a process has used so far. */
export function cpuMs(pid: number): number {
  const f = statFields(pid);
  return ((Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND) * 1000;
}

/** Every process below `pid` (children, grandchildren, ...), read from /proc. */
export function descendants(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number(statFields(Number(entry))[1]) === pid) children.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return children.flatMap((c) => [c, ...descendants(c)]);
}

/** The process's command line, for telling a head from an agent or an actor. */
export function commandLine(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}
