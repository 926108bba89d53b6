import type { Logger } from '../../runtime/internal.js';
import { systemClock } from './clock.js';
import type { Clock, ClockTimer } from './clock.js';
import type { Controller } from './controller.js';
import type { ClusterState } from '../state/cluster-state.js';

export interface LivenessOptions {
  /** Silence after which a node is SUSPECT (no new actors are placed there). */
  suspectAfterMs: number;
  /** Silence after which a node is DEAD and its actors are restarted elsewhere. */
  deadAfterMs: number;
}

export const DEFAULT_LIVENESS: LivenessOptions = { suspectAfterMs: 3000, deadAfterMs: 10_000 };

/**
 * Watches heartbeats and moves silent nodes to SUSPECT, then DEAD.
 *
 * Only silence the head was running to observe counts. When the head itself stops (SIGSTOP, a
 * long GC, a frozen VM) its timers and its sockets wake together, and the timer runs first: judged
 * then, every node looked silent for the whole stall and every actor was restarted, although the
 * agents' heartbeats sat unread in the head's socket buffers. So a tick that comes late credits
 * each node with the time the head missed (the node's silence clock is moved forward by it), and
 * the judging waits for a setImmediate, which runs after the poll phase has read the queued
 * heartbeats. It runs on the system clock unless given another (unit tests move a manual one).
 */
export function watchLiveness(
  state: ClusterState,
  controller: Controller,
  log: Logger,
  options: LivenessOptions,
  clock: Clock = systemClock,
): () => void {
  const everyMs = Math.max(50, Math.min(options.suspectAfterMs, options.deadAfterMs) / 4);
  let lastTick = clock.now();
  /** When the last tick ran: its judging, in a later phase of the turn, measures any stall since. */
  let tickedAt = lastTick;
  let immediate: NodeJS.Immediate | undefined;
  let timer: ClockTimer;
  const tick = () => {
    timer = clock.setTimeout(tick, everyMs);
    const now = clock.now();
    // Lateness past one more interval is the head's own stall, not anything a node did.
    const late = now - lastTick - everyMs;
    lastTick = now;
    if (late > everyMs) {
      log.warn({ stalledMs: late }, 'the head was not running; its stall does not count as node silence');
      controller.nodes.headStalled(late);
    }
    tickedAt = now;
    immediate ??= setImmediate(() => {
      immediate = undefined;
      const judgedAt = clock.now();
      // A stall between this tick and its judging (a long callback later in the same turn) is the
      // head's too; the late tick that would credit it runs only after. Credited here, once.
      if (judgedAt - tickedAt > everyMs) {
        log.warn({ stalledMs: judgedAt - tickedAt }, 'the head was not running; its stall does not count as node silence');
        controller.nodes.headStalled(judgedAt - tickedAt);
        lastTick = judgedAt;
      }
      judge(state, controller, options, judgedAt);
    });
  };
  timer = clock.setTimeout(tick, everyMs);
  return () => {
    clock.clearTimeout(timer);
    if (immediate) clearImmediate(immediate);
  };
}

/** Each node's silence against the bounds; the controller makes the change and says so. */
function judge(state: ClusterState, controller: Controller, options: LivenessOptions, now: number): void {
  for (const node of state.nodes.values()) {
    if (node.state === 'DEAD') continue;
    const silent = now - node.lastSeen;
    if (silent >= options.deadAfterMs) controller.nodes.nodeDead(node, silent);
    else if (silent >= options.suspectAfterMs && node.state === 'ALIVE') controller.nodes.nodeSuspect(node, silent);
  }
}
