import { CallQueue, replicaCallLimit } from '../../runtime/internal.js';
import type { QueueTarget, Replica } from '../../runtime/internal.js';
import type { DeploymentRecord } from '../state/records.js';

/** The head's view of one deployment as a queue target: its READY actors' links to the head. */
function targetOf(d: DeploymentRecord): QueueTarget {
  return {
    get name() {
      return d.spec.name;
    },
    get maxQueue() {
      return d.spec.maxQueue;
    },
    get maxRetries() {
      return d.spec.maxRetries;
    },
    get maxModels() {
      return d.spec.multiplex?.maxModels;
    },
    get perReplicaLimit() {
      return replicaCallLimit(d.spec.batch.maxSize);
    },
    *replicas(): Iterable<Replica> {
      for (const a of d.actors) if (a.state === 'READY' && a.link && !a.link.closed) yield a.link;
    },
    couldServe() {
      if ((d.spec.autoscale?.maxReplicas ?? 0) > 0) return true;
      return d.actors.some((a) => a.state === 'READY' || a.state === 'STARTING' || a.state === 'PENDING' || a.state === 'RESTARTING');
    },
    describeReplicas() {
      return d.actors.map((a) => `${a.name} ${a.state}`).join(', ') || 'no replicas';
    },
  };
}

/**
 * The head's queue for one deployment (HTTP calls, graph steps and SDK calls it routes): the
 * shared {@link CallQueue} over the deployment's READY actors.
 */
export class Dispatcher extends CallQueue {
  constructor(d: DeploymentRecord) {
    super(targetOf(d));
  }
}
