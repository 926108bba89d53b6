import type { ActorView, ClusterView, DeploymentView, Gpu, NodeView } from '../../runtime/internal.js';
import { ClientLoads } from './client-loads.js';
import { EventLog } from './events.js';
import { HeadMetrics } from './metrics.js';
import { inFlightOf } from './records.js';
import type { ActorRecord, ClusterRecords, DeploymentRecord, NodeRecord } from './records.js';
import { RouteBook } from './route-book.js';
import { layoutView } from './deployment-layout.js';
import type { HttpServing } from './deployment-layout.js';
import { versionDeploymentName } from '../control/versions.js';

/** Everything the head knows about the cluster, and how it looks to users. */
export class ClusterState implements ClusterRecords {
  readonly nodes = new Map<string, NodeRecord>();
  readonly actors = new Map<string, ActorRecord>();
  readonly deployments = new Map<string, DeploymentRecord>();
  readonly events = new EventLog();
  readonly metrics: HeadMetrics = new HeadMetrics(this);
  readonly routes = new RouteBook(this.deployments);
  readonly clientLoads = new ClientLoads();
  /**
   * Set by the autoscaler: weighs one deployment's load now instead of at its next look, for a
   * call that found it at zero replicas.
   */
  autoscaleNow: (d: DeploymentRecord) => void = () => {};

  /** Set by the head's server: which process serves a deployment's HTTP inference, and why (head/front-door/handoff-doors.ts). */
  httpServing: (deployment: string) => HttpServing | undefined = () => undefined;

  nodeName(id: string | null): string | null {
    return id === null ? null : (this.nodes.get(id)?.name ?? id);
  }

  actorView(a: ActorRecord): ActorView {
    return {
      id: a.id,
      name: a.name,
      deployment: a.deployment,
      state: a.state,
      reason: a.reason,
      // An actor restored after a head restart is on the node it was, even before that agent is back.
      node: this.nodeName(a.nodeId) ?? a.awaitingNode ?? null,
      gpus: a.gpus,
      device: a.device,
      pid: a.pid,
      restarts: a.restarts,
      inFlight: inFlightOf(a),
      visibleDevices: a.visibleDevices,
      ...(a.instances !== undefined ? { instances: a.instances } : {}),
      ...(a.layout ? { layout: a.layout } : {}),
      ...(a.classGroups ? { concurrencyGroups: a.classGroups } : {}),
      gpuMemoryMiB: a.gpuMemoryMiB,
      stats: a.stats,
    };
  }

  /** A deployment's state as its view says it, without building the view (and a view of each of its actors). */
  deploymentState(d: DeploymentRecord): DeploymentView['state'] {
    const versions = this.#versionsOf(d);
    return versions ? versionedState(versions) : this.#ownState(d);
  }

  deploymentView(d: DeploymentRecord): DeploymentView {
    const versions = this.#versionsOf(d);
    return {
      name: d.spec.name,
      model: d.spec.model,
      replicas: d.spec.replicas,
      state: versions ? versionedState(versions) : this.#ownState(d),
      metadata: d.metadata,
      queued: d.dispatcher.queued,
      requests: d.stats.snapshot(),
      actors: d.actors.map((a) => this.actorView(a)),
      ...(versions ? { versions } : {}),
      ...(d.spec.versionOf !== undefined ? { versionOf: d.spec.versionOf } : {}),
      ...this.#layout(d),
    };
  }

  #layout(d: DeploymentRecord): { layout?: NonNullable<DeploymentView['layout']> } {
    const layout = (d.spec.kind ?? 'model') === 'model' ? layoutView(d, this.httpServing(d.spec.name)) : undefined;
    return layout ? { layout } : {};
  }

  #ownState(d: DeploymentRecord): DeploymentView['state'] {
    // An update's old replicas serve on, but the deployment is READY once its new ones are.
    const ready = d.actors.filter((a) => a.state === 'READY' && !a.superseded).length;
    return d.unhealthy ? 'UNHEALTHY' : ready >= d.spec.replicas ? 'READY' : 'DEPLOYING';
  }

  #versionsOf(d: DeploymentRecord): DeploymentView['versions'] {
    return d.spec.versions?.map((v) => {
      const deployment = versionDeploymentName(d.spec.name, v.version);
      const runs = this.deployments.get(deployment);
      return { version: v.version, model: v.model, weight: v.weight, deployment, state: runs ? this.#ownState(runs) : 'DEPLOYING' };
    });
  }

  nodeView(n: NodeRecord): NodeView {
    const gpus: Gpu[] = n.resources.gpus;
    return { id: n.id, name: n.name, state: n.state, address: n.address, resources: n.resources, gpus };
  }

  view(): ClusterView {
    return {
      nodes: [...this.nodes.values()].map((n) => this.nodeView(n)),
      deployments: [...this.deployments.values()].map((d) => this.deploymentView(d)),
      events: this.events.recent(100),
    };
  }
}

/** The worst state of the versions that take calls: a deployment is READY when every one of them is. */
function versionedState(versions: NonNullable<DeploymentView['versions']>): DeploymentView['state'] {
  const serving = versions.filter((v) => v.weight > 0);
  if (serving.some((v) => v.state === 'UNHEALTHY')) return 'UNHEALTHY';
  return serving.every((v) => v.state === 'READY') ? 'READY' : 'DEPLOYING';
}
