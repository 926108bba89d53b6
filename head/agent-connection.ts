import { AGENT_LEAVING, AgentToHeadSchema, Channel, HeadToAgentReplies, TroupeError, newId } from '../runtime/index.js';
import type { AgentToHead, HeadToAgent, Logger } from '../runtime/index.js';
import type { AgentChannel } from './state.js';
import type { WebSocket } from 'ws';
import type { Controller } from './controller.js';
import { FIRST_MESSAGE_TIMEOUT_MS, FirstMessageBound } from './first-message.js';
import type { ClusterState, NodeRecord } from './state.js';

/**
 * Serves one node agent's control connection: registration, heartbeats, actor exits. A node
 * that reconnects under the same name keeps its identity; the actors it still runs are adopted
 * if the head still wants them there (also after a head restart), and stopped otherwise.
 */
export function serveAgent(ws: WebSocket, address: string, state: ClusterState, controller: Controller, log: Logger, firstMessageTimeoutMs = FIRST_MESSAGE_TIMEOUT_MS): void {
  let node: NodeRecord | undefined;
  // An agent registers at once; a connection that never does holds a socket for nothing.
  const bound = new FirstMessageBound(firstMessageTimeoutMs, () => log.info({ address }, 'closing an agent connection that never registered'));
  const channel: AgentChannel = new Channel<AgentToHead, HeadToAgent, typeof HeadToAgentReplies>(ws, {
    replies: HeadToAgentReplies,
    schema: AgentToHeadSchema,
    onMessage: (message) => {
      bound.heard();
      switch (message.type) {
        case 'register': {
          const existing = [...state.nodes.values()].find((n) => n.name === message.name);
          if (existing?.channel && !existing.channel.closed && existing.state === 'ALIVE') {
            channel.fail(message.id, new TroupeError('TROUPE_ERR_NODE_NAME_TAKEN', `a node named '${message.name}' is already connected`));
            return;
          }
          // A SUSPECT node's old connection is most likely half-open (a network cut the head never
          // saw close): the agent is back on a new one, so the old one goes.
          if (existing?.channel && existing.channel !== channel) existing.channel.terminate();
          // An address the agent advertises wins over the one its connection came from (NAT, proxies).
          const reachable = message.address ?? address;
          node = existing ?? { id: newId(), name: message.name, address: reachable, state: 'ALIVE', resources: message.resources, channel, lastSeen: Date.now(), usage: null };
          Object.assign(node, { address: reachable, state: 'ALIVE', resources: message.resources, channel, lastSeen: Date.now() });
          state.nodes.set(node.id, node);
          for (const actorId of controller.nodeRegistered(node, message.actors)) {
            log.info({ node: node.name, actor: actorId }, 'stopping an actor the head does not want on this node');
            channel.send({ type: 'stopActor', id: newId(), actorId, graceMs: 5000 });
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
          if (node.state === 'SUSPECT') {
            node.state = 'ALIVE';
            // Actors left PENDING while this node was SUSPECT may fit here again.
            controller.schedule();
          }
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
          // With the reporting node: an exit from a node the actor no longer runs on is a stale process.
          controller.actorExited(message.actorId, message, node?.id);
          return;
        default:
          return;
      }
    },
    onRefused: () => bound.heard(),
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
  bound.watch(channel);
}
