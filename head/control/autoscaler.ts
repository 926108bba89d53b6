import type { Logger } from '../../runtime/internal.js';
import type { Controller } from './controller.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { DeploymentRecord } from '../state/records.js';

interface Trend {
  /** Since when the wanted replica count has been above (or below) the current one. */
  since: number;
  direction: 'up' | 'down';
}

/**
 * Queued calls plus calls in flight at its replicas, in the head's queue and in those of the
 * clients calling them directly: the load a deployment must absorb.
 */
function loadOf(state: ClusterState, d: DeploymentRecord): { queued: number; inFlight: number } {
  const clients = state.clientLoads.of(d.spec.name);
  const inFlight = d.actors.reduce((n, a) => n + (a.state === 'READY' ? (a.link?.inFlight ?? 0) : 0), clients.inFlight);
  return { queued: d.dispatcher.queued + d.coldStart.waiting + clients.queued, inFlight };
}

/**
 * Opt-in autoscaling (per deployment `autoscale`): aims at `targetPerReplica` queued+in-flight
 * calls per replica, within [minReplicas, maxReplicas]. A change must be wanted for `upDelayMs`
 * (or `downDelayMs`) before it is made, so bursts do not make replicas flap; except from zero
 * replicas, where a waiting call has nothing else to run on, so the first replica starts at once
 * (the head also asks as soon as such a call arrives, {@link ClusterState.autoscaleNow}). New
 * replicas are placed by the scheduler like any other; every decision is logged and recorded as
 * an event, and so is a decision that failed ('scale-failed').
 */
export function startAutoscaler(state: ClusterState, controller: Controller, log: Logger, everyMs = 250): () => void {
  const trends = new Map<string, Trend>();
  const consider = (d: DeploymentRecord, now: number) => {
    const auto = d.spec.autoscale;
    // A deployment split between versions scales each version's deployment, not itself.
    if (!auto || d.spec.versions) return;
    const { queued, inFlight } = loadOf(state, d);
    const load = queued + inFlight;
    const wanted = Math.min(auto.maxReplicas, Math.max(auto.minReplicas, Math.ceil(load / auto.targetPerReplica)));
    const current = d.spec.replicas;
    // A start from zero was refused moments ago: the next waits for its back-off.
    if (current === 0 && d.startRefused && now < d.startRefused.until) return;
    if (wanted === current) {
      trends.delete(d.spec.name);
      return;
    }
    const direction = wanted > current ? 'up' : 'down';
    if (current > 0) {
      const trend = trends.get(d.spec.name);
      if (!trend || trend.direction !== direction) {
        trends.set(d.spec.name, { since: now, direction });
        return;
      }
      if (now - trend.since < (direction === 'up' ? auto.upDelayMs : auto.downDelayMs)) return;
    }
    trends.delete(d.spec.name);
    const why = `load ${load} (${queued} queued + ${inFlight} in flight) on ${current} replica(s), target ${auto.targetPerReplica} per replica`;
    log.info({ deployment: d.spec.name, from: current, to: wanted, load }, 'autoscaling');
    state.events.add('scaled', `${d.spec.name}: ${current} -> ${wanted} replicas (${why})`);
    const name = d.spec.name;
    // A scale that fails (a new replica that cannot load: the deploy is undone) is said, not swallowed:
    // the 'scaled' event above would otherwise stand for replicas that never came.
    controller.deploy({ ...d.spec, replicas: wanted }).catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      const code = (err as { code?: unknown } | null)?.code;
      // Removed meanwhile: there is nothing left to scale, and the removal was the event.
      if (code === 'TROUPE_ERR_UNKNOWN_DEPLOYMENT' && !state.deployments.has(name)) return;
      log.warn({ deployment: name, from: current, to: wanted, code, err: message }, 'autoscaling failed');
      state.events.add('scale-failed', `${name}: ${current} -> ${wanted} replicas failed: ${message}`);
    });
  };
  state.autoscaleNow = (d) => consider(d, Date.now());
  const timer = setInterval(() => {
    const now = Date.now();
    for (const d of state.deployments.values()) consider(d, now);
  }, everyMs);
  return () => {
    clearInterval(timer);
    state.autoscaleNow = () => {};
  };
}
