import { MAX_QUEUE_WAIT_MS, ModelDeploymentSchema, TroupeError, formatIssues, looksLikeGraphDocument } from '../../runtime/internal.js';
import type { DeploymentView, GraphDeploymentView, Logger, ModelDeployment } from '../../runtime/internal.js';
import type { DeploymentRecord } from '../state/records.js';
import type { Controller } from './controller.js';
import { boundDeploy } from './deploy-bound.js';
import { versionDeploymentName, versionSpecs } from './versions.js';
import { versionServes } from '../calls/inference.js';
import type { DurableStore } from '../state/durable.js';
import type { RunGateway } from '../graph/run-gateway.js';
import type { ClusterState } from '../state/cluster-state.js';

/**
 * The one place deployments and graphs are created, updated and removed. SDK frames
 * (client-connection.ts), HTTP (http/deployment-routes.ts) and the CLI (through HTTP) call it, so
 * the rules cannot drift between them: a graph document deploys a graph (kept in the state file
 * once it runs), a model cannot take a graph's name, a READY deployment is replaced only when the
 * caller says so, and a deployment a graph calls is deleted only by force.
 */

export interface DeployRequest {
  /** A model or fn spec (the SDK's `deploy` input), or a graph document (`graph` and `nodes`). */
  spec: unknown;
  /** Bound on the wait for READY: past it `ready` rejects with TROUPE_ERR_DEPLOY_TIMEOUT (the deploy goes on). */
  timeoutMs: number;
  /**
   * Whether a READY deployment with a different spec may be replaced. The SDK asks for it
   * (`replace: true`, or `update`); an HTTP PUT is declarative and always does.
   */
  replace: boolean;
  /** Turns a spec's `model` into what actors load (HTTP: an uploaded model's name into its content reference). */
  resolveModel?: (model: unknown) => unknown;
}

/**
 * A deploy under way: what it is, whether it is new, what it replaced, its wait for READY (which
 * resolves only once the change is in the state file too), and `saved`, for an answer that does
 * not wait for READY: resolves once the change is in the state file, so a head killed right after
 * acknowledging a change comes back with it.
 */
export type DeployStarted =
  | {
      kind: 'deployment';
      name: string;
      created: boolean;
      replaced: string | undefined;
      ready: Promise<DeploymentView>;
      saved: Promise<void>;
    }
  | {
      kind: 'graph';
      name: string;
      created: boolean;
      replaced: string | undefined;
      ready: Promise<GraphDeploymentView>;
      saved: Promise<void>;
    };

export interface UndeployOptions {
  /** Delete a deployment even while graphs call it (they fail until it is deployed again). */
  force?: boolean;
}

/**
 * Keys of `next` whose value differs from `current`'s (both parsed specs, defaults filled in).
 * The replica count of a deployment that autoscales alike in both is the autoscaler's to change
 * (head/control/autoscaler.ts writes it into the spec), and of one that leaves it to the head in
 * both, the head's (head/control/replicas-at-load.ts): the same spec sent again is not a change.
 */
export function specChanges(current: ModelDeployment, next: ModelDeployment): string[] {
  const keys = new Set([...Object.keys(current), ...Object.keys(next)]);
  const value = (spec: ModelDeployment, key: string) => JSON.stringify((spec as Record<string, unknown>)[key]);
  const scaled = current.autoscale !== undefined && value(current, 'autoscale') === value(next, 'autoscale');
  const headsCount = scaled || (current.autoReplicas === true && next.autoReplicas === true);
  return [...keys].filter((key) => value(current, key) !== value(next, key) && !(headsCount && key === 'replicas')).sort();
}

/** How often a dropped version's queue is looked at before it stops. */
const RETIRE_POLL_MS = 50;

/** `given` with its model names (the deployment's and each version's) turned into what actors load. */
function resolveModels(given: Record<string, unknown>, resolve: ((model: unknown) => unknown) | undefined): Record<string, unknown> {
  if (!resolve) return given;
  const out: Record<string, unknown> = { ...given };
  if (given.model !== undefined) out.model = resolve(given.model);
  if (Array.isArray(given.versions))
    out.versions = given.versions.map((v: unknown) =>
      typeof v === 'object' && v !== null && 'model' in v ? { ...v, model: resolve((v as { model: unknown }).model) } : v,
    );
  return out;
}

export class Deployments {
  readonly #state: ClusterState;
  readonly #controller: Controller;
  readonly #graphs: RunGateway;
  readonly #log: Logger;
  readonly #store: DurableStore | undefined;

  constructor(state: ClusterState, controller: Controller, graphs: RunGateway, log: Logger, store?: DurableStore) {
    this.#state = state;
    this.#controller = controller;
    this.#graphs = graphs;
    this.#log = log;
    this.#store = store;
  }

  /**
   * Starts a deploy of a model, fn or graph; throws (changing nothing) when the request is refused
   * before anything is placed. Await `ready` for the outcome.
   */
  deploy(request: DeployRequest): DeployStarted {
    return looksLikeGraphDocument(request.spec) ? this.#deployGraph(request) : this.#deployModel(request);
  }

  #deployModel(request: DeployRequest): DeployStarted {
    const raw = request.spec;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
      throw new TroupeError('TROUPE_ERR_BAD_SPEC', 'a deployment spec is an object such as {"name": "mlp", "model": "mlp.onnx"}');
    const given = raw as Record<string, unknown>;
    const name = given.name;
    if (typeof name === 'string' && this.#graphs.has(name)) {
      throw new TroupeError('TROUPE_ERR_BAD_SPEC', `'${name}' is a graph; a deployment cannot take its name (delete the graph first)`);
    }
    if (given.versionOf !== undefined)
      throw new TroupeError(
        'TROUPE_ERR_BAD_SPEC',
        "'versionOf' is set by the head on the deployments that run versions; list versions instead",
      );
    const parsed = ModelDeploymentSchema.safeParse(resolveModels(given, request.resolveModel));
    if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `invalid deployment: ${formatIssues(parsed.error.issues)}`);
    const spec = parsed.data;
    const whole = this.#state.deployments.get(spec.name)?.spec.versionOf;
    if (whole !== undefined)
      throw new TroupeError(
        'TROUPE_ERR_BAD_SPEC',
        `'${spec.name}' runs a version of '${whole}': change the versions of '${whole}' instead`,
      );
    const created = !this.#state.deployments.has(spec.name);
    const versions = versionSpecs(spec);
    for (const v of versions) {
      const taken = this.#state.deployments.get(v.name);
      if (taken && taken.spec.versionOf !== spec.name)
        throw new TroupeError('TROUPE_ERR_BAD_SPEC', `'${v.name}' would run a version of '${spec.name}' but is a deployment of its own`);
    }
    const replaced = this.#replacing([spec, ...versions], request.replace);
    const dropped = this.#versionsOf(spec.name).filter((name) => !versions.some((v) => v.name === name));
    // The split changes with the first deploy; versions left out stop once their queued calls are served.
    // A deployment that serves on replicas of its own and becomes split keeps them serving until
    // its versions are READY: its spec changes (and its replicas retire) only then, so no call
    // finds neither its replicas nor a version that can serve.
    const current = this.#state.deployments.get(spec.name);
    const splitsNow = spec.versions !== undefined && current !== undefined && !current.spec.versions && current.actors.length > 0;
    const deployed = splitsNow
      ? Promise.all(versions.map((s) => this.#controller.deploy(s))).then(() => this.#controller.deploy(spec))
      : Promise.all([spec, ...versions].map((s) => this.#controller.deploy(s)));
    for (const name of dropped) void this.#retireVersion(name);
    const ready = boundDeploy(
      deployed.then(async () => {
        await this.#saved();
        return this.#views([spec.name])[0]!;
      }),
      request.timeoutMs,
      { kind: 'deployment', name: spec.name },
      () => this.#views([spec.name, ...versions.map((v) => v.name)]),
    );
    return { kind: 'deployment', name: spec.name, created, replaced, ready, saved: this.#saved() };
  }

  /** Resolves once every change made so far is in the state file (at once without one). */
  #saved(): Promise<void> {
    return this.#store?.flush() ?? Promise.resolve();
  }

  /**
   * Promotes `version` of a deployment split between versions: every call goes to it, the other
   * versions' deployments stop once their queued calls are served, and the split as it was is
   * kept in the spec (`promotedFrom`, saved with it) for a rollback.
   */
  promote(name: string, version: string, timeoutMs: number): DeployStarted {
    const spec = this.#versioned(name);
    const versions = spec.versions!;
    const kept = versions.find((v) => v.version === version);
    if (!kept)
      throw new TroupeError(
        'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
        `deployment '${name}' has no version '${version}' (versions: ${versions.map((v) => v.version).join(', ')})`,
      );
    // Promoting what already takes every call changes nothing, and keeps the rollback point.
    const promotedFrom = versions.length === 1 ? spec.promotedFrom : versions;
    // The deployment's `model` is its first version's: the promoted one's from now on.
    const next = { ...spec, model: kept.model, versions: [{ ...kept, weight: 100 }], ...(promotedFrom ? { promotedFrom } : {}) };
    return this.deploy({ spec: next, timeoutMs, replace: true });
  }

  /**
   * Rolls a rollout back. After a promotion, the split as it was before it comes back (the
   * promoted version keeps every call until the versions brought back can serve theirs);
   * otherwise the first version listed, the one the rollout started from, takes every call.
   * A deployment that runs one version and was not promoted has nothing to roll back: refused.
   */
  rollback(name: string, timeoutMs: number): DeployStarted {
    const spec = this.#versioned(name);
    const { promotedFrom, ...rest } = spec;
    if (promotedFrom)
      return this.deploy({ spec: { ...rest, model: promotedFrom[0]!.model, versions: promotedFrom }, timeoutMs, replace: true });
    const versions = spec.versions!;
    if (versions.length === 1)
      throw new TroupeError(
        'TROUPE_ERR_BAD_REQUEST',
        `deployment '${name}' runs one version ('${versions[0]!.version}') and no promotion to undo: nothing to roll back (PUT the versions you want instead)`,
      );
    return this.deploy({ spec: { ...spec, versions: [{ ...versions[0]!, weight: 100 }] }, timeoutMs, replace: true });
  }

  /** The spec of `name`, which must be split between versions. */
  #versioned(name: string): ModelDeployment {
    const d = this.#state.deployments.get(name);
    if (!d) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment named '${name}'`);
    if (!d.spec.versions) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `deployment '${name}' has no versions to promote or roll back`);
    return d.spec;
  }

  /** The deployments that run versions of `name`. */
  #versionsOf(name: string): string[] {
    return [...this.#state.deployments.values()].filter((d) => d.spec.versionOf === name).map((d) => d.spec.name);
  }

  /**
   * Stops a version's deployment once the calls already sent to it are served and a version the
   * spec lists can take the calls it took (bounded), so none is lost meanwhile.
   */
  async #retireVersion(name: string): Promise<void> {
    const deadline = Date.now() + MAX_QUEUE_WAIT_MS;
    for (;;) {
      const d = this.#state.deployments.get(name);
      if (!d) return;
      const idle = d.dispatcher.queued === 0 && d.coldStart.waiting === 0;
      if ((idle && this.#replaced(d)) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, RETIRE_POLL_MS));
    }
    await this.#controller.undeploy(name).catch(() => {});
  }

  /** Whether what dropped version `d` served is served without it: a listed version can, or the deployment is one model again, or gone. */
  #replaced(d: DeploymentRecord): boolean {
    const whole = this.#state.deployments.get(d.spec.versionOf ?? '');
    const versions = whole?.spec.versions;
    if (!versions) return true;
    return versions.some((v) => v.weight > 0 && versionServes(this.#state, versionDeploymentName(whole!.spec.name, v.version)));
  }

  #deployGraph(request: DeployRequest): DeployStarted {
    const name = String((request.spec as { graph: unknown }).graph);
    const created = !this.#graphs.has(name);
    let replaced: string | undefined;
    const doc = request.spec;
    const ready = this.#graphs.deploy(doc, {
      timeoutMs: request.timeoutMs,
      check: (specs) => {
        for (const spec of specs) {
          if (this.#graphs.has(spec.name))
            throw new TroupeError(
              'TROUPE_ERR_BAD_SPEC',
              `${spec.kind ?? 'model'} '${spec.name}' of graph '${name}': '${spec.name}' is a graph; a deployment cannot take its name`,
            );
        }
        replaced = this.#replacing(specs, request.replace);
      },
      // Kept once it deploys, even if the caller stopped waiting for it first.
      onDeployed: (view) => this.#store?.setGraph(view.name, doc),
    });
    // The check ran synchronously inside deploy: a refusal is already in `ready`.
    const saved = ready.then(
      () => this.#saved(),
      () => {},
    );
    return {
      kind: 'graph',
      name,
      created,
      replaced,
      ready: ready.then(async (view) => (await saved, view)),
      saved: this.#saved(),
    };
  }

  /**
   * What replacing READY deployments with `specs` means, in words (undefined when nothing READY
   * changes); refused with TROUPE_ERR_DEPLOYMENT_EXISTS unless `replace`.
   */
  #replacing(specs: readonly ModelDeployment[], replace: boolean): string | undefined {
    const changes: string[] = [];
    for (const spec of specs) {
      const d = this.#state.deployments.get(spec.name);
      // Only what is serving is protected: a deployment with no replicas (unloaded, or deployed with
      // none) counts as READY in its view, but a deploy replaces nothing that runs.
      if (!d || d.spec.replicas === 0 || this.#state.deploymentView(d).state !== 'READY') continue;
      const differ = specChanges(d.spec, spec);
      if (differ.length > 0)
        changes.push(
          `'${spec.name}' (${differ.map((k) => `${k}: ${JSON.stringify((d.spec as Record<string, unknown>)[k]) ?? 'unset'} -> ${JSON.stringify((spec as Record<string, unknown>)[k]) ?? 'unset'}`).join(', ')})`,
        );
    }
    if (changes.length === 0) return undefined;
    const what = `READY deployment ${changes.join(', ')}`;
    if (!replace) {
      throw new TroupeError(
        'TROUPE_ERR_DEPLOYMENT_EXISTS',
        `this deploy would replace the ${what}; say so with deploy(spec, { replace: true }) or cluster.update(spec), or pick another name`,
      );
    }
    this.#log.info({ replaced: specs.map((s) => s.name) }, `replacing the ${what}`);
    return `replacing the ${what}`;
  }

  /**
   * Removes a graph (its models and fns stay) or a deployment. A deployment that graphs call is
   * refused with TROUPE_ERR_DEPLOYMENT_IN_USE naming them, unless `force`.
   */
  async undeploy(name: string, options: UndeployOptions = {}): Promise<{ name: string; kind: 'graph' | 'deployment' }> {
    if (this.#graphs.has(name)) {
      this.#graphs.undeploy(name);
      this.#store?.deleteGraph(name);
      await this.#saved();
      return { name, kind: 'graph' };
    }
    const d = this.#state.deployments.get(name);
    if (d?.spec.versionOf !== undefined)
      throw new TroupeError(
        'TROUPE_ERR_DEPLOYMENT_IN_USE',
        `'${name}' runs a version of '${d.spec.versionOf}': change its versions, promote or roll back, or delete '${d.spec.versionOf}'`,
      );
    if (!d) {
      const known =
        [...this.#state.deployments.keys(), ...this.#graphs.views().map((g) => g.name)].map((n) => `'${n}'`).join(', ') || 'none';
      throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `no deployment or graph named '${name}' (deployed: ${known})`);
    }
    const users = this.#graphs.usersOf(name);
    if (users.length > 0 && !options.force) {
      throw new TroupeError(
        'TROUPE_ERR_DEPLOYMENT_IN_USE',
        `deployment '${name}' is used by graph${users.length > 1 ? 's' : ''} ${users.map((g) => `'${g}'`).join(', ')}: delete ${users.length > 1 ? 'them' : 'it'} first, or force the delete (?force=true, undeploy(name, { force: true }), troupe delete --force) and ${users.length > 1 ? 'they fail' : 'it fails'} until '${name}' is deployed again`,
      );
    }
    if (users.length > 0) this.#log.warn({ deployment: name, graphs: users }, 'deleting a deployment that graphs call (forced)');
    const versions = this.#versionsOf(name);
    await this.#controller.undeploy(name);
    await Promise.all(versions.map((v) => this.#controller.undeploy(v).catch(() => {})));
    await this.#saved();
    return { name, kind: 'deployment' };
  }

  #views(names: readonly string[]): DeploymentView[] {
    return names.flatMap((n) => {
      const d = this.#state.deployments.get(n);
      return d ? [this.#state.deploymentView(d)] : [];
    });
  }
}
