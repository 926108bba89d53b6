import { readFileSync, readdirSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's CPU times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

function statFields(pid: number): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces: the fields that follow start after its ')'.
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/**
 * CPU time (user + system, ms) a process has used so far; with `reaped`, with that of its children
 * that have ended and been waited for (a load generator such as h2load, run and ended within a measurement).
 */
export function cpuMs(pid: number, reaped = false): number {
  const f = statFields(pid);
  const children = reaped ? Number(f[13]) + Number(f[14]) : 0;
  return ((Number(f[11]) + Number(f[12]) + children) / TICKS_PER_SECOND) * 1000;
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

/** Whether `pid` still exists and can be read (a process may end while we list them). */
export function readable(pid: number): boolean {
  try {
    cpuMs(pid);
    commandLine(pid);
    return true;
  } catch {
    return false;
  }
}

/** What kind of Troupe or baseline process `pid` is, from its command line. */
export function role(pid: number): string {
  const args = commandLine(pid).join(' ');
  if (args.includes('http-relay')) return args.endsWith(' model') ? 'relay model process' : 'relay server';
  if (args.includes('plain-http-server')) return 'simplest server';
  if (args.includes('socket-replica')) return 'bare replica';
  if (args.includes('actors/host')) return 'actor';
  if (args.includes('front-door/worker-main')) return 'front-door worker';
  if (/main\.js head\b/.test(args)) return 'head';
  if (/main\.js agent\b/.test(args)) return 'agent';
  return 'other';
}

/**
 * Runs `work` and says how much CPU (microseconds per request, `requests` read from its result)
 * this process (the load generator) and each kind of process below it used meanwhile.
 */
export async function cpuPerRequest<T>(
  work: () => Promise<T>,
  requests: (result: T) => number,
  self = 'client',
): Promise<{ result: T; cpu: Map<string, number> }> {
  const pids = [process.pid, ...descendants(process.pid)].filter((p) => readable(p));
  // This process's count takes in the load generators it ran and waited for meanwhile.
  const before = new Map(pids.map((p) => [p, cpuMs(p, p === process.pid)]));
  const result = await work();
  const n = Math.max(1, requests(result));
  const cpu = new Map<string, number>();
  for (const pid of pids.filter((p) => readable(p))) {
    const name = pid === process.pid ? self : role(pid);
    if (name === 'other') continue;
    cpu.set(name, (cpu.get(name) ?? 0) + ((cpuMs(pid, pid === process.pid) - before.get(pid)!) / n) * 1000);
  }
  return { result, cpu };
}
