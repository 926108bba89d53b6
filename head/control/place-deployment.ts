import type { Histogram } from 'prom-client';
import type { ActorRecord, DeploymentRecord, NodeRecord } from '../state/records.js';
import type { ActorsByNode } from './actors-by-node.js';
import { place } from './scheduler.js';

/**
 * One deployment's part of a scheduling pass: its PENDING actors placed in turn against the
 * pass's nodes and index (each placement timed into `placements`), each handed to `start` as
 * STARTING. At the first that fits nowhere the deployment's other PENDING actors take its reason:
 * nothing was placed in between, so they would be refused alike.
 */
export function placeDeployment(
  d: DeploymentRecord,
  nodes: NodeRecord[],
  byNode: ActorsByNode,
  placements: Histogram,
  start: (a: ActorRecord, node: NodeRecord) => void,
): void {
  for (const a of d.actors) {
    if (a.state !== 'PENDING') continue;
    const started = performance.now();
    const placement = place(
      { cpus: d.spec.cpus, gpus: d.spec.gpus, memoryBytes: d.memoryReserved },
      d.spec.name,
      nodes,
      byNode,
      d.spec.placement,
    );
    placements.observe((performance.now() - started) / 1000);
    if (!placement.ok) {
      for (const rest of d.actors) if (rest.state === 'PENDING') rest.reason = placement.reason;
      return;
    }
    a.nodeId = placement.node.id;
    a.gpus = placement.gpus;
    a.gpuShare = placement.gpuShare;
    a.device = a.gpus.length === 0 ? 'cpu' : `gpu:${a.gpus.join(',')}`;
    a.state = 'STARTING';
    a.reason = null;
    byNode.add(a);
    start(a, placement.node);
  }
}
