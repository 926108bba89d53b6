import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The nice value background threads run at: they get a core only when the event loops have none to do. */
const BACKGROUND_NICE = 10;

/**
 * Lowers the calling thread's scheduling priority, where the system allows one thread's to be set
 * (Linux: a thread is a task with an id of its own, /proc/thread-self names it). A worker thread
 * that parses a 30 MB body for seconds then does not take the core a process's event loop needs to
 * answer a health check; elsewhere, or where the system refuses, nothing changes.
 */
export function runInBackground(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, BACKGROUND_NICE);
  } catch {
    // Not Linux, or not allowed: the thread keeps the process's priority.
  }
}
