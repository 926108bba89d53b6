import { TroupeError, newId } from '../../runtime/internal.js';
import type { AgentToHead, NodeResources } from '../../runtime/internal.js';
import type { AgentLink } from './agent-link.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { NodeRecord } from '../state/records.js';

// How node records change: plain functions over cluster state, called only by the controller
// (which owns every state change and what follows from it: placement, restarts, events).

/** What an agent says of its node when it registers. */
export interface AgentRegistration {
  name: string;
  /** Where actors on the node are reached: the address the agent advertises, or its connection's. */
  address: string;
  resources: NodeResources;
}

export type Heartbeat = Extract<AgentToHead, { type: 'heartbeat' }>;

/**
 * Makes or renews the record of the node whose agent registered on `agent`: a node that comes
 * back under its name keeps its identity. Throws TROUPE_ERR_NODE_NAME_TAKEN while another
 * connection of a live node holds the name.
 */
export function registerNode(state: ClusterState, registration: AgentRegistration, agent: AgentLink, now: number): NodeRecord {
  const { name, address, resources } = registration;
  const existing = [...state.nodes.values()].find((n) => n.name === name);
  if (existing?.agent && !existing.agent.closed && existing.state === 'ALIVE') {
    throw new TroupeError('TROUPE_ERR_NODE_NAME_TAKEN', `a node named '${name}' is already connected`);
  }
  // A SUSPECT node's old connection is most likely half-open (a network cut the head never saw
  // close): the agent is back on a new one, so the old one goes.
  if (existing?.agent && existing.agent !== agent) existing.agent.close();
  const node: NodeRecord = existing ?? { id: newId(), name, address, state: 'ALIVE', resources, agent, lastSeen: now, usage: null };
  Object.assign(node, { address, state: 'ALIVE', resources, agent, lastSeen: now });
  state.nodes.set(node.id, node);
  return node;
}

/** Records what a heartbeat reports. Returns true when it brought a SUSPECT node back ALIVE. */
export function applyHeartbeat(state: ClusterState, node: NodeRecord, heartbeat: Heartbeat, now: number): boolean {
  node.lastSeen = now;
  const revived = node.state === 'SUSPECT';
  if (revived) node.state = 'ALIVE';
  if (heartbeat.gpus) node.resources = { ...node.resources, gpus: heartbeat.gpus };
  for (const { actorId, usedMemoryMiB } of heartbeat.actorGpuMemory ?? []) {
    const a = state.actors.get(actorId);
    if (a) a.gpuMemoryMiB = usedMemoryMiB;
  }
  for (const { actorId, rssBytes, cpuSeconds } of heartbeat.processes ?? []) {
    const usage = { rssBytes, cpuSeconds };
    if (actorId === null) node.usage = usage;
    else {
      const a = state.actors.get(actorId);
      if (a) a.usage = usage;
    }
  }
  return revived;
}
