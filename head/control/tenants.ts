import { z } from 'zod';
import { MODEL_VERSION, TroupeError, splitModelName, unknownVersion } from '../../runtime/internal.js';
import type { ModelMetadata, Params, TenantReply, TenantState } from '../../runtime/internal.js';
import { startsOnDemand } from '../calls/cold-start.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { TritonModelStat } from '../state/inference-statistics.js';
import type { ActorRecord, DeploymentRecord } from '../state/records.js';
import { versionDeploymentName, versionMap } from './versions.js';

/**
 * The models of a multiplexed deployment's set (its tenants) as models of their own, named
 * `{deployment}:{model}` (ModelMesh's per-model endpoints, Triton's explicit model control): their
 * readiness, signature, statistics, repository state, and load and unload. The head cannot see
 * the set's directory (it is on the agents' disks), so it asks the READY replicas, which list it
 * again first; what they answered last is kept for when none runs (a deployment scaled to zero).
 */

/** A model name as a replica takes it (protocol/actor.ts): what a URL's `{deployment}:{model}` may name. */
const TenantModelSchema = z.string().min(1).max(256);

/** How long a replica may take to answer a question; a load may take as long as a model's load. */
const ASK_MS = 10_000;
const LOAD_MS = 120_000;

export interface Tenant {
  /** The multiplexed deployment (for one split between versions, the deployment the versions are of). */
  d: DeploymentRecord;
  model: string;
  /** As the request named it: `{deployment}:{model}`. */
  name: string;
  version: string | undefined;
}

/** One tenant over a deployment's replicas: where it is loaded (and pinned), loading, or why it cannot load. */
interface Merged {
  loadedOn: string[];
  pinnedOn: string[];
  loading: boolean;
  unavailable: string | undefined;
}

/** What the replicas last said of each deployment's models: the answer when none runs now. */
const lastSeen = new WeakMap<DeploymentRecord, Map<string, TenantState>>();

/** Whether `d`'s replicas serve a set of models (its own, or its versions'). */
export function isMultiplexed(d: DeploymentRecord): boolean {
  return d.spec.multiplex !== undefined;
}

/**
 * The tenant a request names, or undefined when its name has no `:model`. A `:model` of a
 * deployment that is not multiplexed, a model name that cannot be one, or a version the
 * deployment lacks are 404s naming only what was asked for (as findTarget's).
 */
export function tenantNamed(state: ClusterState, params: Params): Tenant | undefined {
  const { deployment, model } = splitModelName(params.name);
  if (model === undefined) return undefined;
  const d = state.deployments.get(deployment);
  if (!d || !isMultiplexed(d) || !TenantModelSchema.safeParse(model).success)
    throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `unknown model '${params.name.slice(0, 100)}'`);
  const versions = versionMap(d.spec);
  if (params.version !== undefined && !(versions ? Object.hasOwn(versions, params.version) : params.version === MODEL_VERSION))
    throw unknownVersion(params.name, params.version, versions ? Object.keys(versions) : [MODEL_VERSION]);
  return { d, model, name: params.name, version: params.version };
}

/** The deployments whose replicas serve the tenant's calls: the deployment, or its versions taking calls (or the one pinned). */
function serving(state: ClusterState, t: Tenant): DeploymentRecord[] {
  const versions = t.d.spec.versions;
  if (!versions) return [t.d];
  const wanted = t.version !== undefined ? versions.filter((v) => v.version === t.version) : versions.filter((v) => v.weight > 0);
  return wanted.flatMap((v) => state.deployments.get(versionDeploymentName(t.d.spec.name, v.version)) ?? []);
}

function readyReplicas(ds: readonly DeploymentRecord[]): ActorRecord[] {
  return ds.flatMap((d) => d.actors.filter((a) => a.state === 'READY' && a.link?.tenant !== undefined && !a.link.closed));
}

/** Asks every replica; those that fail to answer (gone meanwhile, too slow) are left out. */
async function askAll(actors: readonly ActorRecord[], op: 'scan', model?: string): Promise<{ actor: ActorRecord; reply: TenantReply }[]> {
  const answers = await Promise.allSettled(actors.map((a) => a.link!.tenant!(op, model, ASK_MS)));
  return answers.flatMap((r, i) => (r.status === 'fulfilled' ? [{ actor: actors[i]!, reply: r.value }] : []));
}

function remember(d: DeploymentRecord, states: readonly TenantState[], model?: string): void {
  let seen = lastSeen.get(d);
  if (!seen || model === undefined) lastSeen.set(d, (seen = new Map()));
  if (model !== undefined) seen.delete(model);
  // Kept for when no replica runs, so nothing is loaded then: a model is AVAILABLE or UNAVAILABLE.
  for (const s of states) {
    const kept: TenantState =
      s.state === 'UNAVAILABLE' ? { name: s.name, state: s.state, reason: s.reason ?? '' } : { name: s.name, state: 'AVAILABLE' };
    if (!seen.has(s.name) || kept.state === 'UNAVAILABLE') seen.set(s.name, kept);
  }
}

/** Each tenant's state over the replicas' answers. */
function merge(answers: readonly { actor: ActorRecord; reply: TenantReply }[]): Map<string, Merged> {
  const out = new Map<string, Merged>();
  for (const { actor, reply } of answers)
    for (const s of reply.tenants ?? []) {
      let m = out.get(s.name);
      if (!m) out.set(s.name, (m = { loadedOn: [], pinnedOn: [], loading: false, unavailable: undefined }));
      if (s.state === 'LOADED') m.loadedOn.push(actor.name);
      if (s.pinned) m.pinnedOn.push(actor.name);
      if (s.state === 'LOADING') m.loading = true;
      if (s.state === 'UNAVAILABLE') m.unavailable ??= s.reason ?? 'its last load failed';
    }
  return out;
}

/** The tenant's state over the serving replicas (and what they said is kept), or undefined where none has the model. */
async function tenantState(state: ClusterState, t: Tenant): Promise<Merged | undefined> {
  const ds = serving(state, t);
  const answers = await askAll(readyReplicas(ds), 'scan', t.model);
  for (const d of ds)
    remember(
      d,
      answers.filter((a) => a.actor.deployment === d.spec.name).flatMap((a) => a.reply.tenants ?? []),
      t.model,
    );
  if (answers.length > 0) return merge(answers).get(t.model);
  // None runs: what they said last, where the deployment starts a replica for a call.
  const kept = ds.flatMap((d) => (startsOnDemand(d.spec) ? [...(lastSeen.get(d)?.values() ?? [])] : [])).filter((s) => s.name === t.model);
  return kept.length > 0 ? merge([{ actor: { name: '' } as ActorRecord, reply: { tenants: kept } }]).get(t.model) : undefined;
}

/**
 * Readiness meaning "can be served now or after a load": its file is in the set and no replica
 * remembers a failed load of it (unless one has it loaded); 'unknown' where no replica has it.
 */
export async function tenantReadiness(state: ClusterState, t: Tenant): Promise<'ready' | 'not ready' | 'unknown'> {
  const m = await tenantState(state, t);
  if (!m) return 'unknown';
  return m.loadedOn.length > 0 || (m.unavailable === undefined && !serving(state, t).every((d) => d.unhealthy)) ? 'ready' : 'not ready';
}

/** The tenant's inputs and outputs, read by a READY replica from the model's file (or its loaded session). */
export async function tenantMetadata(state: ClusterState, t: Tenant): Promise<ModelMetadata> {
  const replicas = readyReplicas(serving(state, t));
  if (replicas.length === 0)
    throw new TroupeError(
      'TROUPE_ERR_NOT_READY',
      `model '${t.name}': no replica of deployment '${t.d.spec.name}' is READY to read its file (its inputs and outputs are not known yet)`,
    );
  const reply = await replicas[0]!.link!.tenant!('describe', t.model, ASK_MS);
  if (!reply.metadata) throw new TroupeError('TROUPE_ERR_INTERNAL', `model '${t.name}': the replica did not describe it`);
  return reply.metadata;
}

/**
 * The tenant's Triton statistics: every call of it its replicas ran (the head keeps the totals of
 * replicas gone); one entry per version for a deployment split between versions. A model no
 * replica has, and none ran, is a 404.
 */
export async function tenantStats(state: ClusterState, t: Tenant): Promise<TritonModelStat[]> {
  const versions = versionMap(t.d.spec);
  const runs = versions
    ? Object.entries(versions)
        .filter(([v]) => t.version === undefined || v === t.version)
        .flatMap(([version, name]) => {
          const d = state.deployments.get(name);
          return d ? [{ d, version }] : [];
        })
    : [{ d: t.d, version: MODEL_VERSION }];
  const known = runs.some(({ d }) => d.stats.tenants.has(t.model)) || (await tenantState(state, t)) !== undefined;
  if (!known) throw new TroupeError('TROUPE_ERR_UNKNOWN_DEPLOYMENT', `unknown model '${t.name.slice(0, 100)}'`);
  return runs.map(({ d, version }) => {
    const stats = d.stats.tenants.get(t.model);
    return stats ? stats.tritonBySize(t.name, version) : { ...emptyStats(d, t.name), version };
  });
}

function emptyStats(d: DeploymentRecord, name: string): TritonModelStat {
  // A model that never ran: the empty statistics in Triton's shape (no rows, no executions).
  const zero = { ...d.stats.triton(name), last_inference: 0, inference_count: 0, execution_count: 0, batch_stats: [] };
  for (const key of Object.keys(zero.inference_stats) as (keyof TritonModelStat['inference_stats'])[])
    zero.inference_stats[key] = { count: 0, ns: 0 };
  return zero;
}

/** A tenant in the repository index: Triton's entry with the states of a model that loads on demand. */
export interface TenantEntry {
  name: string;
  version: string;
  state: 'LOADED' | 'LOADING' | 'AVAILABLE' | 'UNAVAILABLE';
  reason: string;
}

function entryOf(name: string, m: Merged, kept: boolean): TenantEntry {
  const asOf = kept ? ' (as its replicas last said: none runs now)' : '';
  const pinned = m.pinnedOn.length > 0 ? `; pinned on ${m.pinnedOn.join(', ')}` : '';
  if (m.loadedOn.length > 0)
    return { name, version: MODEL_VERSION, state: 'LOADED', reason: `loaded on ${m.loadedOn.join(', ')}${pinned}` };
  if (m.loading) return { name, version: MODEL_VERSION, state: 'LOADING', reason: 'a replica is loading it' };
  if (m.unavailable !== undefined) return { name, version: MODEL_VERSION, state: 'UNAVAILABLE', reason: m.unavailable + asOf };
  return { name, version: MODEL_VERSION, state: 'AVAILABLE', reason: `loads on its first call${asOf}` };
}

/**
 * Every model of multiplexed deployment `d` with its state: its READY replicas list their
 * directories again first (so a file added or removed shows at once), or, with none running,
 * what they said last.
 */
export async function tenantEntries(state: ClusterState, d: DeploymentRecord): Promise<TenantEntry[]> {
  const t: Tenant = { d, model: '', name: d.spec.name, version: undefined };
  const ds = serving(state, t);
  const answers = await askAll(readyReplicas(ds), 'scan');
  for (const one of ds) {
    const mine = answers.filter((a) => a.actor.deployment === one.spec.name);
    if (mine.length > 0)
      remember(
        one,
        mine.flatMap((a) => a.reply.tenants ?? []),
      );
  }
  const kept = answers.length === 0;
  const merged = kept
    ? merge([{ actor: { name: '' } as ActorRecord, reply: { tenants: ds.flatMap((one) => [...(lastSeen.get(one)?.values() ?? [])]) } }])
    : merge(answers);
  return [...merged].map(([model, m]) => entryOf(`${d.spec.name}:${model}`, m, kept));
}

/**
 * Triton's explicit load of one model: loaded into the replica its calls go to first (one holding
 * it, else its home) and pinned there, never evicted for another model, until an unload.
 */
export async function loadTenant(state: ClusterState, t: Tenant): Promise<void> {
  const ds = serving(state, t);
  const replicas = readyReplicas(ds);
  if (replicas.length === 0)
    throw new TroupeError(
      'TROUPE_ERR_NOT_READY',
      `cannot load model '${t.name}': deployment '${t.d.spec.name}' has no READY replica (POST /v2/repository/models/${t.d.spec.name}/load starts its replicas)`,
    );
  for (const d of ds) {
    const mine = replicas.filter((a) => a.deployment === d.spec.name);
    if (mine.length === 0) continue;
    const place = d.dispatcher.placeOf(t.model);
    const actor = mine.find((a) => a.link === place) ?? mine[0]!;
    const reply = await actor.link!.tenant!('load', t.model, LOAD_MS);
    remember(d, reply.tenants ?? [], t.model);
    d.dispatcher.setHeld(actor.link!, t.model, true);
  }
}

/** Triton's unload of one model: unpinned and taken out of every replica (a later call loads it again). */
export async function unloadTenant(state: ClusterState, t: Tenant): Promise<void> {
  for (const d of serving(state, t)) {
    const replicas = readyReplicas([d]);
    const answers = await Promise.all(replicas.map((a) => a.link!.tenant!('unload', t.model, ASK_MS)));
    for (const a of replicas) d.dispatcher.setHeld(a.link!, t.model, false);
    remember(
      d,
      answers.flatMap((r) => r.tenants ?? []),
      t.model,
    );
  }
}
