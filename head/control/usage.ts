import { toMilli } from '../../runtime/internal.js';
import type { ActorRecord } from '../state/records.js';

/** What an ALIVE node has left, given the actors placed on it. */
export interface NodeUsage {
  /** Whole thousandths of a CPU (runtime/resources.ts: sums of shares stay exact). */
  cpusUsedMilli: number;
  memoryUsed: number;
  /** Actor processes placed on the node (STARTING, READY or DRAINING), held against its --max-actors. */
  actors: number;
  /** Used share per GPU index, in whole thousandths of the GPU. */
  gpuUsedMilli: Map<number, number>;
  /** Actor names holding each GPU, for PENDING reasons a person can act on. */
  gpuHolders: Map<number, string[]>;
  /** Replicas of the deployment being placed, on the node and on each of its GPUs. */
  sameDeployment: number;
  sameDeploymentOnGpu: Map<number, number>;
}

/** What the actors on node `nodeId` (among `actors`) use, and how many replicas of `deployment` it holds. */
export function usageOn(nodeId: string, actors: Iterable<ActorRecord>, deployment: string): NodeUsage {
  const usage: NodeUsage = {
    cpusUsedMilli: 0,
    memoryUsed: 0,
    actors: 0,
    gpuUsedMilli: new Map(),
    gpuHolders: new Map(),
    sameDeployment: 0,
    sameDeploymentOnGpu: new Map(),
  };
  for (const a of actors) {
    if (a.nodeId !== nodeId || a.state === 'DEAD' || a.state === 'PENDING') continue;
    usage.cpusUsedMilli += toMilli(a.cpus);
    usage.memoryUsed += a.memoryBytes;
    usage.actors++;
    if (a.deployment === deployment) usage.sameDeployment++;
    for (const g of a.gpus) {
      usage.gpuUsedMilli.set(g, (usage.gpuUsedMilli.get(g) ?? 0) + toMilli(a.gpuShare));
      usage.gpuHolders.set(g, [...(usage.gpuHolders.get(g) ?? []), a.name]);
      if (a.deployment === deployment) usage.sameDeploymentOnGpu.set(g, (usage.sameDeploymentOnGpu.get(g) ?? 0) + 1);
    }
  }
  return usage;
}
