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
  const { versions, ...common } = spec;
  return (versions ?? []).map((v) => ({
    ...common,
    name: versionDeploymentName(spec.name, v.version),
    model: v.model,
    replicas: v.replicas ?? spec.replicas,
    versionOf: spec.name,
  }));
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

  constructor(versions: readonly VersionSpec[]) {
    this.#versions = versions;
    this.#current = versions.map(() => 0);
  }

  next(): VersionSpec {
    let best = -1;
    for (let i = 0; i < this.#versions.length; i++) {
      this.#current[i]! += this.#versions[i]!.weight;
      if (this.#versions[i]!.weight > 0 && (best < 0 || this.#current[i]! > this.#current[best]!)) best = i;
    }
    this.#current[best]! -= 100;
    return this.#versions[best]!;
  }
}

// One split per spec in force: a PUT that changes the weights starts a fresh split.
const splits = new WeakMap<ModelDeployment, TrafficSplit>();

/** The deployment the next call to versioned `spec` goes to. */
export function pickVersion(spec: ModelDeployment): string {
  let split = splits.get(spec);
  if (!split) splits.set(spec, (split = new TrafficSplit(spec.versions!)));
  return versionDeploymentName(spec.name, split.next().version);
}
