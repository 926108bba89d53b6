import type { Logger } from '../runtime/index.js';
import type { Controller } from './controller.js';
import type { ClusterState } from './state.js';

export interface LivenessOptions {
  /** Silence after which a node is SUSPECT (no new actors are placed there). */
  suspectAfterMs: number;
  /** Silence after which a node is DEAD and its actors are restarted elsewhere. */
  deadAfterMs: number;
}

export const DEFAULT_LIVENESS: LivenessOptions = { suspectAfterMs: 3000, deadAfterMs: 10_000 };

/** Watches heartbeats and moves silent nodes to SUSPECT, then DEAD. */
export function watchLiveness(state: ClusterState, controller: Controller, log: Logger, options: LivenessOptions): () => void {
  const timer = setInterval(
    () => {
      const now = Date.now();
      for (const node of state.nodes.values()) {
        if (node.state === 'DEAD') continue;
        const silent = now - node.lastSeen;
        if (silent >= options.deadAfterMs) {
          node.state = 'DEAD';
          node.channel?.terminate();
          node.channel = undefined;
          log.warn({ node: node.name, silentMs: silent }, 'node is DEAD');
          state.events.add('node-lost', `${node.name} DEAD after ${silent} ms without a heartbeat`);
          controller.nodeLost(node, 'lost');
        } else if (silent >= options.suspectAfterMs && node.state === 'ALIVE') {
          node.state = 'SUSPECT';
          log.warn({ node: node.name, silentMs: silent }, 'node is SUSPECT');
          state.events.add('node-suspect', `${node.name} SUSPECT after ${silent} ms without a heartbeat`);
        }
      }
    },
    Math.max(50, Math.min(options.suspectAfterMs, options.deadAfterMs) / 4),
  );
  return () => clearInterval(timer);
}
