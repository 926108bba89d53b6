import type { Logger } from '../runtime/index.js';
import type { Controller } from './controller.js';
import type { ClusterState, NodeRecord } from './state.js';

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
 * heartbeats.
 */
export function watchLiveness(state: ClusterState, controller: Controller, log: Logger, options: LivenessOptions): () => void {
  const everyMs = Math.max(50, Math.min(options.suspectAfterMs, options.deadAfterMs) / 4);
  let lastTick = Date.now();
  let immediate: NodeJS.Immediate | undefined;
  const timer = setInterval(() => {
    const now = Date.now();
    // Lateness past one more interval is the head's own stall, not anything a node did.
    const late = now - lastTick - everyMs;
    lastTick = now;
    if (late > everyMs) {
      log.warn({ stalledMs: late }, 'the head was not running; its stall does not count as node silence');
      for (const node of state.nodes.values()) node.lastSeen = Math.min(now, node.lastSeen + late);
    }
    immediate ??= setImmediate(() => {
      immediate = undefined;
      judge(state, controller, log, options);
    });
  }, everyMs);
  return () => {
    clearInterval(timer);
    if (immediate) clearImmediate(immediate);
  };
}

function judge(state: ClusterState, controller: Controller, log: Logger, options: LivenessOptions): void {
  const now = Date.now();
  for (const node of state.nodes.values()) {
    if (node.state === 'DEAD') continue;
    const silent = now - node.lastSeen;
    if (silent >= options.deadAfterMs) markDead(node, silent, state, controller, log);
    else if (silent >= options.suspectAfterMs && node.state === 'ALIVE') {
      node.state = 'SUSPECT';
      log.warn({ node: node.name, silentMs: silent }, 'node is SUSPECT');
      state.events.add('node-suspect', `${node.name} SUSPECT after ${silent} ms without a heartbeat`);
    }
  }
}

function markDead(node: NodeRecord, silent: number, state: ClusterState, controller: Controller, log: Logger): void {
  node.state = 'DEAD';
  node.channel?.terminate();
  node.channel = undefined;
  log.warn({ node: node.name, silentMs: silent }, 'node is DEAD');
  state.events.add('node-lost', `${node.name} DEAD after ${silent} ms without a heartbeat`);
  controller.nodeLost(node, 'lost');
}
