import {
  AGENT_LEAVING,
  AgentToHeadSchema,
  Channel,
  DEFAULT_MAX_FRAME_BYTES,
  HEAD_SHUTTING_DOWN,
  HeadToAgentReplies,
} from '../../runtime/internal.js';
import type { AgentToHead, HeadToAgent, Logger } from '../../runtime/internal.js';
import type { WebSocket } from 'ws';
import { channelAgentLink } from '../control/agent-link.js';
import type { AgentChannel } from '../control/agent-link.js';
import type { Controller } from '../control/controller.js';
import { FIRST_MESSAGE_TIMEOUT_MS, FirstMessageBound } from './first-message.js';
import type { NodeRecord } from '../state/records.js';
import { RelayedActors } from './relayed-actors.js';
import type { ActorLinkServer } from './relayed-actors.js';

/**
 * Serves one node agent's control connection: registration, heartbeats, actor exits, each handed
 * to the controller, which owns the node's record. A node that reconnects under the same name
 * keeps its identity; the actors it still runs are adopted if the head still wants them there
 * (also after a head restart), and stopped otherwise. The controller reaches the agent back
 * through this connection's AgentLink (agent-link.ts).
 */
export function serveAgent(
  ws: WebSocket,
  address: string,
  controller: Controller,
  log: Logger,
  actorLinks: ActorLinkServer,
  firstMessageTimeoutMs = FIRST_MESSAGE_TIMEOUT_MS,
  /** Under TLS: the head's certificate and key, for the node's replicas' direct ports (sent in the registration's reply). */
  directTls?: { cert: string; key: string },
): void {
  let node: NodeRecord | undefined;
  // An agent registers at once; a connection that never does holds a socket for nothing.
  const bound = new FirstMessageBound(firstMessageTimeoutMs, () =>
    log.info({ address }, 'closing an agent connection that never registered'),
  );
  const channel: AgentChannel = new Channel<AgentToHead, HeadToAgent, typeof HeadToAgentReplies>(ws, {
    replies: HeadToAgentReplies,
    schema: AgentToHeadSchema,
    // The head passes users' values on as they came (protocol/value-types.ts).
    forwardsValues: true,
    // It carries actors' frames whole, each within the relay's own bound, inside its envelope.
    maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
    onMessage: (message) => {
      bound.heard();
      switch (message.type) {
        case 'register': {
          // An address the agent advertises wins over the one its connection came from (NAT, proxies).
          const registration = { name: message.name, address: message.address ?? address, resources: message.resources };
          try {
            node = controller.nodes.agentRegistered(registration, message.actors, agent);
          } catch (err) {
            channel.fail(message.id, err);
            return;
          }
          channel.reply(message.id, { nodeId: node.id, ...(directTls ? { directTls } : {}) });
          // After the reply: the agent knows its node id before its first start order arrives.
          controller.schedule();
          return;
        }
        case 'heartbeat':
          if (node) controller.nodes.nodeHeartbeat(node, message);
          return;
        case 'actorExited':
          // With the reporting node: an exit from a node the actor no longer runs on is a stale process.
          controller.actorExited(message.actorId, message, node?.id);
          return;
        case 'actorOpen':
          try {
            relayed.open(node, message.actorId, message.link, message.secret);
            channel.reply(message.id, {});
          } catch (err) {
            channel.fail(message.id, err);
          }
          return;
        case 'actorFrame':
          relayed.frame(message.actorId, message.link, message.frame);
          return;
        case 'actorClose':
          relayed.closed(message.actorId, message.link, message.code, message.reason);
          return;
        default:
          return;
      }
    },
    onRefused: () => bound.heard(),
    onClose: (_code, reason) => {
      relayed.endAll("the agent's connection closed");
      // The head closing its own connections is no news about the node: nothing to record or warn of.
      if (node && reason !== HEAD_SHUTTING_DOWN) controller.nodes.agentDisconnected(node, agent, reason === AGENT_LEAVING);
    },
  });
  const agent = channelAgentLink(channel);
  const relayed = new RelayedActors(channel, actorLinks);
  bound.watch(channel);
}
