import { ModelDeploymentSchema, TroupeError, formatIssues, looksLikeGraphDocument } from '../../runtime/internal.js';
import type { DeploymentView, GraphDeploymentView, Logger, ModelDeployment } from '../../runtime/internal.js';
import type { Controller } from './controller.js';
import { boundDeploy } from './deploy-bound.js';
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

/** A deploy under way: what it is, whether it is new, what it replaced, and its wait for READY. */
export type DeployStarted =
  | { kind: 'deployment'; name: string; created: boolean; replaced: string | undefined; ready: Promise<DeploymentView> }
  | { kind: 'graph'; name: string; created: boolean; replaced: string | undefined; ready: Promise<GraphDeploymentView> };

export interface UndeployOptions {
  /** Delete a deployment even while graphs call it (they fail until it is deployed again). */
  force?: boolean;
}

/**
 * Keys of `next` whose value differs from `current`'s (both parsed specs, defaults filled in).
 * The replica count of a deployment that autoscales alike in both is the autoscaler's to change
 * (head/control/autoscaler.ts writes it into the spec), so the same spec sent again is not a change.
 */
export function specChanges(current: ModelDeployment, next: ModelDeployment): string[] {
  const keys = new Set([...Object.keys(current), ...Object.keys(next)]);
  const value = (spec: ModelDeployment, key: string) => JSON.stringify((spec as Record<string, unknown>)[key]);
  const scaled = current.autoscale !== undefined && value(current, 'autoscale') === value(next, 'autoscale');
  return [...keys].filter((key) => value(current, key) !== value(next, key) && !(scaled && key === 'replicas')).sort();
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
    const resolved = request.resolveModel ? { ...given, model: request.resolveModel(given.model) } : given;
    const parsed = ModelDeploymentSchema.safeParse(resolved);
    if (!parsed.success) throw new TroupeError('TROUPE_ERR_BAD_SPEC', `invalid deployment: ${formatIssues(parsed.error.issues)}`);
    const spec = parsed.data;
    const created = !this.#state.deployments.has(spec.name);
    const replaced = this.#replacing([spec], request.replace);
    const ready = boundDeploy(this.#controller.deploy(spec), request.timeoutMs, { kind: 'deployment', name: spec.name }, () =>
      this.#views([spec.name]),
    );
    return { kind: 'deployment', name: spec.name, created, replaced, ready };
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
    return { kind: 'graph', name, created, replaced, ready };
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
      return { name, kind: 'graph' };
    }
    if (!this.#state.deployments.has(name)) {
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
    await this.#controller.undeploy(name);
    return { name, kind: 'deployment' };
  }

  #views(names: readonly string[]): DeploymentView[] {
    return names.flatMap((n) => {
      const d = this.#state.deployments.get(n);
      return d ? [this.#state.deploymentView(d)] : [];
    });
  }
}
