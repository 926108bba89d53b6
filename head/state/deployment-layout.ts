import { batchMaxSizeOf } from '../../runtime/internal.js';
import type { DeploymentView } from '../../runtime/internal.js';
import type { DeploymentRecord } from './records.js';
import { choosesReplicasAtLoad } from './record-changes.js';

/** Which process serves a deployment's HTTP inference connections, and why (head/front-door/handoff-doors.ts). */
export interface HttpServing {
  byReplica: boolean;
  why: string;
}

/** The layout a READY replica of `d` said it runs (else any replica that said one), for what the head reports. */
function replicaLayout(d: DeploymentRecord) {
  return (d.actors.find((a) => a.state === 'READY' && !a.superseded && a.layout) ?? d.actors.find((a) => a.layout))?.layout;
}

/**
 * Sessions per replica and rows a run as `d`'s replicas serve them: the spec's where it names them,
 * else what its replicas chose at load (actors/auto-layout.ts), else the defaults they may choose.
 */
export function servedLayout(d: DeploymentRecord): { instances: number; batchMaxSize: number } {
  const layout = replicaLayout(d);
  return {
    instances: d.spec.instances ?? layout?.instances ?? 1,
    batchMaxSize: d.spec.batch?.maxSize ?? layout?.batchMaxSize ?? batchMaxSizeOf(d.spec),
  };
}

const count = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * What describe() and the status page say of how a model deployment runs: its replicas' layout and
 * who serves its HTTP, and why each was chosen. Undefined until a replica has said how it runs.
 */
export function layoutView(d: DeploymentRecord, http: HttpServing | undefined): DeploymentView['layout'] {
  const layout = replicaLayout(d);
  if (!layout) return undefined;
  const batching = layout.batchMaxSize > 1 ? `batches of up to ${layout.batchMaxSize} rows` : 'batching off';
  const where = layout.inferenceThread ? ', on inference threads' : '';
  const spin = layout.idleSpinMs ? `, spinning ${layout.idleSpinMs} ms when idle` : '';
  const wanted = layout.replicasWanted;
  const replicas =
    wanted === undefined || !choosesReplicasAtLoad(d.spec)
      ? ''
      : d.spec.replicas >= wanted
        ? `; the head runs the ${wanted} asked`
        : `; the head runs ${d.spec.replicas} of the ${wanted} asked: the rest did not fit beside what the nodes held`;
  const door = http ? (http.byReplica ? ', HTTP served by the replica' : ', HTTP through the front-door workers') : '';
  return {
    chosen: `${count(d.spec.replicas, 'replica')} x ${count(layout.instances, 'instance')} x ${count(layout.threads, 'thread')}${where}, ${batching}${spin}${door}`,
    reason: `${layout.chosen === 'auto' ? 'chosen at load' : 'as the deployment names it'}: ${layout.reason}${replicas}${http ? `; HTTP: ${http.why}` : ''}`,
    auto: layout.chosen === 'auto',
  };
}
