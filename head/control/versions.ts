import type { ModelDeployment, VersionSpec } from '../../runtime/internal.js';

// Deployments that split their traffic between versions (canary rollouts). Each version runs as a
// deployment of its own, `{name}.{version}`, marked `versionOf: name`: placed, scaled, restarted,
// measured and saved like any other. The deployment `name` itself holds no replicas; calls to it
// are sent to one of its versions by weight (head/calls/inference.ts).

/** The deployment that runs `version` of `name`. */
export function versionDeploymentName(name: string, version: string): string {
  return `${name}.${version}`;
}

/** Replicas a deployment runs itself: none when its versions run them. */
export function ownReplicas(spec: ModelDeployment): number {
  return spec.versions ? 0 : spec.replicas;
}

/** The deployments that run `spec`'s versions: its settings, each version's model and replica count. */
export function versionSpecs(spec: ModelDeployment): ModelDeployment[] {
  const { versions, promotedFrom: _promotedFrom, ...common } = spec;
  return (versions ?? []).map((v) => ({
    ...common,
    name: versionDeploymentName(spec.name, v.version),
    model: v.model,
    replicas: v.replicas ?? spec.replicas,
    versionOf: spec.name,
  }));
}

/** The version a deployment runs when it runs one of another's (`{name}.{version}`), else undefined. */
export function versionName(spec: ModelDeployment): string | undefined {
  return spec.versionOf === undefined ? undefined : spec.name.slice(spec.versionOf.length + 1);
}

/**
 * The deployments a restarted head runs, from the specs its state file kept. The deployments that
 * run versions are derived, never trusted as saved: each is recomputed from the spec of the
 * deployment it is a version of, exactly as a deploy computes it (only its replica count is kept
 * when it autoscales, since the autoscaler writes it). A saved version whose deployment is gone or
 * no longer lists it is dropped, and a listed version missing from the file is created.
 */
export function restoredSpecs(saved: readonly ModelDeployment[]): ModelDeployment[] {
  const byName = new Map(saved.map((s) => [s.name, s]));
  const out: ModelDeployment[] = [];
  for (const spec of saved) {
    if (spec.versionOf !== undefined) continue;
    out.push(spec);
    for (const v of versionSpecs(spec)) {
      const kept = byName.get(v.name);
      const scaled = kept?.versionOf === spec.name && kept.autoscale !== undefined && v.autoscale !== undefined;
      out.push(scaled ? { ...v, replicas: kept.replicas } : v);
    }
  }
  return out;
}

/** version -> the deployment that runs it, for URLs that pin a version. */
export function versionMap(spec: ModelDeployment): Record<string, string> | undefined {
  if (!spec.versions) return undefined;
  return Object.fromEntries(spec.versions.map((v) => [v.version, versionDeploymentName(spec.name, v.version)]));
}

/** Smooth weighted round robin (as nginx balances upstreams): exact shares over any window, no bursts. */
class TrafficSplit {
  readonly #versions: readonly VersionSpec[];
  readonly #current: number[];
  readonly #total: number;

  constructor(versions: readonly VersionSpec[]) {
    this.#versions = versions;
    this.#current = versions.map(() => 0);
    this.#total = versions.reduce((n, v) => n + v.weight, 0);
  }

  next(): VersionSpec {
    let best = -1;
    for (let i = 0; i < this.#versions.length; i++) {
      this.#current[i]! += this.#versions[i]!.weight;
      if (this.#versions[i]!.weight > 0 && (best < 0 || this.#current[i]! > this.#current[best]!)) best = i;
    }
    this.#current[best]! -= this.#total;
    return this.#versions[best]!;
  }
}

// One split per spec in force and per set of versions able to serve: a PUT that changes the
// weights, or a version becoming able to serve (or ceasing to), starts a fresh split.
const splits = new WeakMap<ModelDeployment, Map<string, TrafficSplit>>();

/**
 * The deployment the next call to versioned `spec` goes to. A version takes calls only once it
 * can serve them (`serves`: a READY replica, or one that starts for a call); until then its share
 * goes to the versions that can, so adding a version, or changing one's model, loses no call while
 * its replicas start. When none with a weight can serve, the versions at weight 0 that can (kept
 * warm: the one a rollout moves from, as v1 at 0 and a new v2 at 100) take the calls in equal
 * shares; when none at all can, the split is by the weights alone (the call waits for its
 * version, or fails saying why).
 */
export function pickVersion(spec: ModelDeployment, serves: (deployment: string) => boolean): { deployment: string; version: string } {
  const weighted = spec.versions!.filter((v) => v.weight > 0);
  const able = weighted.filter((v) => serves(versionDeploymentName(spec.name, v.version)));
  const standby =
    able.length > 0
      ? []
      : spec
          .versions!.filter((v) => v.weight === 0 && serves(versionDeploymentName(spec.name, v.version)))
          .map((v) => ({ ...v, weight: 1 }));
  const chosen = able.length > 0 ? able : standby.length > 0 ? standby : weighted;
  const key = `${standby.length > 0 ? 'standby:' : ''}${chosen.map((v) => v.version).join('/')}`;
  let byKey = splits.get(spec);
  if (!byKey) splits.set(spec, (byKey = new Map()));
  let split = byKey.get(key);
  if (!split) byKey.set(key, (split = new TrafficSplit(chosen)));
  const version = split.next().version;
  return { deployment: versionDeploymentName(spec.name, version), version };
}
