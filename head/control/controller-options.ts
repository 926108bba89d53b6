import type { Clock } from './clock.js';

// What the controller is tuned with, and what agents report to it.

export interface ControllerOptions {
  /** Crashes allowed inside `restartWindowMs` before an actor is DEAD (default 5 in 10 min). */
  maxRestarts: number;
  restartWindowMs: number;
  /** Time an actor gets to finish in-flight work when stopped. */
  drainMs: number;
  /**
   * After a head restart, how long actors restored from the state file wait for their node's
   * agent to reconnect and list them before they are placed anew.
   */
  adoptGraceMs: number;
  /** The size of a deployment's model file where the head knows it, for the default memory reservation. */
  modelBytes?: (model: string) => number | undefined;
  /** Scheduling each event-loop turn may do before the rest waits for a later turn (scheduling-turns.ts). */
  scheduleSliceMs: number;
  /** Time for back-off, grace periods and drains (default: the system clock; unit tests move a manual one). */
  clock?: Clock;
}

export const DEFAULT_CONTROLLER_OPTIONS: ControllerOptions = {
  maxRestarts: 5,
  restartWindowMs: 600_000,
  drainMs: 10_000,
  adoptGraceMs: 15_000,
  scheduleSliceMs: 50,
};

/** A running actor an agent lists when it registers. */
export interface RunningActorReport {
  actorId: string;
  pid: number;
}

export interface ActorExitReport {
  code: number | null;
  signal: string | null;
  stderrTail: string;
  killedBecause?: string | undefined;
}
