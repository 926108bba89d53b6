import { AGENT_LEAVING, AgentToHeadSchema, Channel, newId } from '../runtime/index.js';
import type { AgentToHead, HeadToAgent, Logger } from '../runtime/index.js';
import type { WebSocket } from 'ws';
import type { Controller } from './controller.js';
import type { ClusterState, NodeRecord } from './state.js';

/**
 * Serves one node agent's control connection: registration, heartbeats, actor exits. A node
 * that reconnects under the same name keeps its identity, and actors it still runs that the
 * head no longer wants are stopped.
 */
export function serveAgent(ws: WebSocket, address: string, state: ClusterState, controller: Controller, log: Logger): void {
  let node: NodeRecord | undefined;
  const channel: Channel<AgentToHead, HeadToAgent> = new Channel<AgentToHead, HeadToAgent>(ws, {
    schema: AgentToHeadSchema,
    onMessage: (message) => {
      switch (message.type) {
        case 'register': {
          const existing = [...state.nodes.values()].find((n) => n.name === message.name);
          if (existing?.channel && !existing.channel.closed && existing.state !== 'DEAD') {
            channel.fail(message.id, new Error(`a node named '${message.name}' is already connected`));
            return;
          }
          node = existing ?? { id: newId(), name: message.name, address, state: 'ALIVE', resources: message.resources, channel, lastSeen: Date.now(), usage: null };
          Object.assign(node, { address, state: 'ALIVE', resources: message.resources, channel, lastSeen: Date.now() });
          state.nodes.set(node.id, node);
          for (const running of message.actors) {
            const a = state.actors.get(running.actorId);
            if (!a || a.nodeId !== node.id || a.state === 'DEAD') {
              channel.send({ type: 'stopActor', id: newId(), actorId: running.actorId, graceMs: 5000 });
            }
          }
          channel.reply(message.id, { nodeId: node.id });
          log.info({ node: node.name, cpus: message.resources.cpus, gpus: message.resources.gpus.length }, 'node joined');
          state.events.add('node-joined', `${node.name} joined (${message.resources.cpus} CPUs, ${message.resources.gpus.length} GPUs)`);
          controller.schedule();
          return;
        }
        case 'heartbeat':
          if (!node) return;
          node.lastSeen = Date.now();
          if (node.state === 'SUSPECT') node.state = 'ALIVE';
          if (message.gpus) node.resources = { ...node.resources, gpus: message.gpus };
          for (const { actorId, usedMemoryMiB } of message.actorGpuMemory ?? []) {
            const a = state.actors.get(actorId);
            if (a) a.gpuMemoryMiB = usedMemoryMiB;
          }
          for (const { actorId, rssBytes, cpuSeconds } of message.processes ?? []) {
            const usage = { rssBytes, cpuSeconds };
            if (actorId === null) node.usage = usage;
            else {
              const a = state.actors.get(actorId);
              if (a) a.usage = usage;
            }
          }
          return;
        case 'actorExited':
          controller.actorExited(message.actorId, message);
          return;
        default:
          return;
      }
    },
    onClose: (_code, reason) => {
      if (!node || node.channel !== channel) return;
      node.channel = undefined;
      if (reason === AGENT_LEAVING) {
        node.state = 'DEAD';
        log.info({ node: node.name }, 'node left');
        state.events.add('node-left', `${node.name} left the cluster`);
        controller.nodeLost(node, 'left');
        return;
      }
      // Liveness decides when a silent node is DEAD; a closed socket only makes it SUSPECT now.
      if (node.state === 'ALIVE') node.state = 'SUSPECT';
      log.warn({ node: node.name }, 'node connection closed');
    },
  });
}
