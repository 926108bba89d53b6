import { CallQueue, replicaCallLimit } from '../../runtime/internal.js';
import { servedLayout } from '../state/deployment-layout.js';
import type { QueueTarget, Replica, TroupeError } from '../../runtime/internal.js';
import type { DeploymentRecord } from '../state/records.js';
import { MethodQueue } from './method-queue.js';

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
      return replicaCallLimit(servedLayout(d).batchMaxSize);
    },
    *replicas(): Iterable<Replica> {
      for (const a of d.actors) if (a.state === 'READY' && a.link && !a.link.closed) yield a.link;
    },
    couldServe() {
      if ((d.spec.autoscale?.maxReplicas ?? 0) > 0) return true;
      return d.actors.some((a) => a.state === 'READY' || a.state === 'STARTING' || a.state === 'PENDING' || a.state === 'RESTARTING');
    },
    allDead() {
      return d.actors.length > 0 && d.actors.every((a) => a.state === 'DEAD');
    },
    describeReplicas() {
      return d.actors.map((a) => `${a.name} ${a.state}${a.reason ? `: ${a.reason}` : ''}`).join(', ') || 'no replicas';
    },
  };
}

/**
 * The head's queue for one deployment (HTTP calls, graph steps and SDK calls it routes): the
 * shared {@link CallQueue} over the deployment's READY actors, and for a class actor the queue
 * of its method calls, pumped on the same changes (an actor READY, a call answered, one gone).
 */
export class Dispatcher extends CallQueue {
  readonly methods: MethodQueue;

  constructor(d: DeploymentRecord) {
    super(targetOf(d));
    this.methods = new MethodQueue(d);
  }

  override get queued(): number {
    return super.queued + this.methods.queued;
  }

  override pump(): void {
    super.pump();
    this.methods.pump();
  }

  override failAll(error: TroupeError): void {
    super.failAll(error);
    this.methods.failAll(error);
  }
}
