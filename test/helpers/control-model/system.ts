import assert from 'node:assert/strict';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { stopChild } from '../../../cli/children.js';
import { connect } from '../../../runtime/internal.js';
import type { Cluster, TroupeError } from '../../../runtime/internal.js';
import { startCluster, waitFor } from '../cluster.js';
import type { TestCluster } from '../cluster.js';
import { DIST_ROOT } from '../graphs.js';
import { grpcClient } from '../grpc-client.js';
import { callLoad, probeGrpc, probeHttp, probeInput, probeSdk, whichModel, writeDistinctMlps } from '../version-probes.js';
import type { CallLoad, ModelAnswers, Probe } from '../version-probes.js';
import { allowedAnswers } from './model.js';
import type { DeploymentRef, ModelState } from './model.js';

/** Model files the commands choose from: distinguishable MLPs. */
export const FILES = ['mlp-0.onnx', 'mlp-1.onnx', 'mlp-2.onnx'];
const SETTLE_MS = 90_000;

/**
 * The real cluster the model-based test drives: a head and two agents (n1, n2), an SDK client
 * that retries through restarts, and the probes that say which model answered.
 */
export class RealSystem {
  readonly cluster: TestCluster;
  readonly client: Cluster;
  readonly answers: ModelAnswers;
  /** The commands run so far, in order (every run's). */
  readonly steps: string[] = [];

  private constructor(cluster: TestCluster, client: Cluster, answers: ModelAnswers) {
    this.cluster = cluster;
    this.client = client;
    this.answers = answers;
  }

  static agentArgs(name: string): string[] {
    return ['--name', name, '--cpus', '16', '--heartbeat-ms', '200', '--module-dir', DIST_ROOT];
  }

  static async start(): Promise<RealSystem> {
    const cluster = await startCluster({ agents: [RealSystem.agentArgs('n1'), RealSystem.agentArgs('n2')] });
    const { answers } = await writeDistinctMlps(cluster.modelDir, FILES.length);
    await mkdir(join(cluster.modelDir, 'set'), { recursive: true });
    const client = await connect(cluster.url, { retries: 40 });
    return new RealSystem(cluster, client, answers);
  }

  async stop(): Promise<void> {
    await this.client.close();
    await this.cluster.stop();
  }

  async request(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${this.cluster.url}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  /** A request that must succeed (2xx), else the test fails naming what was asked and answered. */
  async ok(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    const answer = await this.request(method, path, body);
    assert.ok(answer.status >= 200 && answer.status < 300, `${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  /** Two SDK callers and one HTTP caller calling `name` until stopped; every answer and failure kept. */
  load(name: string): CallLoad {
    return callLoad([
      () => probeSdk(this.client, this.answers, name),
      () => probeSdk(this.client, this.answers, name),
      () => probeHttp(this.cluster.url, this.answers, name),
    ]);
  }

  /** Adds member `member` (a copy of `file`) to the multiplexed set's directory. */
  async addMember(member: string, file: string): Promise<void> {
    await copyFile(join(this.cluster.modelDir, file), join(this.cluster.modelDir, 'set', `${member}.onnx`));
  }

  /** Back to nothing deployed, between runs of the property. */
  /**
   * Calls the class actor `ctr`. An instance that restarted from its constructor since this client
   * saw it answer says so once (TROUPE_ERR_STATE_LOST, the call not run) where the model expects it.
   */
  async counterCall(m: ModelState, method: string, ...args: unknown[]): Promise<number> {
    const ctr = this.client.actorHandle('ctr').withOptions({ timeoutMs: 30_000 });
    if (m.counter?.lostUnseen) {
      await assert.rejects(Promise.resolve(ctr.call(method, ...args)), (thrown: unknown) => {
        const err = thrown as TroupeError;
        assert.equal(err.code, 'TROUPE_ERR_STATE_LOST', `the call after ctr lost its state: ${err.message}`);
        assert.match(err.message, /instance ctr#0 restarted .*with no checkpoint to restore/);
        return true;
      });
      m.counter.lostUnseen = false;
    }
    return ctr.call<number>(method, ...args);
  }

  async reset(): Promise<void> {
    const view = await this.client.describe();
    await this.request('DELETE', '/api/v1/deployments/g');
    // Through the SDK client that called it: what it saw of the old instance is forgotten with it.
    if (view.deployments.some((d) => d.name === 'ctr')) await this.client.undeploy('ctr', { force: true });
    for (const d of view.deployments)
      if (d.versionOf === undefined) await this.request('DELETE', `/api/v1/deployments/${d.name}?force=true`);
    await rm(join(this.cluster.modelDir, 'set'), { recursive: true, force: true });
    await mkdir(join(this.cluster.modelDir, 'set'), { recursive: true });
    await waitFor('nothing deployed', async () => (await this.client.describe()).deployments.length === 0, SETTLE_MS);
  }

  /** The head restarted (kill -9 or SIGTERM) on the same data directory. */
  async restartHead(signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    await this.cluster.restartHead(signal);
  }

  /** Agent n2 killed (its actors end with it) and started again under the same name. */
  async restartAgent(): Promise<void> {
    const index = this.cluster.agents.findLastIndex((a) => a.process.exitCode === null && a.process.signalCode === null);
    const agent = this.cluster.agents[index]!;
    agent.process.kill('SIGKILL');
    await agent.exited;
    this.cluster.agents.splice(index, 1);
    // The head may still hold the old connection for a moment: a name taken is retried.
    await waitFor(
      'n2 to rejoin',
      async () => {
        const started = await this.cluster.startAgent(RealSystem.agentArgs('n2')).catch(async (err: unknown) => {
          const failed = this.cluster.agents.pop();
          if (failed) await stopChild(failed, 5000);
          throw err;
        });
        return started;
      },
      SETTLE_MS,
      500,
    );
  }

  /** The pids of the actors running now, by actor name (`on`: only those on that node). */
  async actorPids(on?: string): Promise<Map<string, number>> {
    const view = await this.client.describe();
    return new Map(
      view.deployments.flatMap((d) =>
        d.actors.filter((a) => a.pid !== null && a.state === 'READY' && (on === undefined || a.node === on)).map((a) => [a.name, a.pid!]),
      ),
    );
  }

  /**
   * Waits until none of `pids` is listed as a READY actor any more: an actor killed (or whose
   * agent was) has been seen gone by the head, so settling waits for its replacement. A method
   * call sent to it before then fails ACTOR_DIED, never retried (it may have changed its state).
   */
  async gone(pids: readonly number[]): Promise<void> {
    await waitFor(
      `actors ${pids.join(', ')} gone`,
      async () => {
        const now = new Set((await this.actorPids()).values());
        return pids.every((p) => !now.has(p));
      },
      SETTLE_MS,
    );
  }

  /** The node the class actor's instance runs on. */
  async counterNode(): Promise<string | null> {
    const view = await this.client.describe();
    return view.deployments.find((d) => d.name === 'ctr')?.actors[0]?.node ?? null;
  }

  /**
   * Waits until the cluster serves what the model says: both nodes ALIVE, each deployment READY
   * with the versions and weights the model lists (and no version's deployment left over), the
   * graph and the class actor READY.
   */
  async settle(m: ModelState): Promise<void> {
    await waitFor(
      'the cluster to serve what the model says',
      async () => {
        const view = await this.client.describe();
        if (view.nodes.filter((n) => n.state === 'ALIVE').length < 2) return false;
        const names = new Set(view.deployments.map((d) => d.name));
        for (const [name, d] of m.deployments) {
          const v = view.deployments.find((x) => x.name === name);
          if (!v || v.state !== 'READY') return false;
          if (d.kind === 'split') {
            const listed = JSON.stringify(v.versions?.map((x) => [x.version, x.weight]));
            if (listed !== JSON.stringify(d.versions.map((x) => [x.version, x.weight]))) return false;
            if (v.versions?.some((x) => x.state !== 'READY')) return false;
            for (const other of view.deployments)
              if (other.versionOf === name && !d.versions.some((x) => `${name}.${x.version}` === other.name)) return false;
          }
          if (d.kind === 'plain' && v.actors.some((a) => a.state !== 'READY')) return false;
        }
        if (m.graph && !names.has(m.graph.over)) return false;
        if (m.counter && view.deployments.find((x) => x.name === 'ctr')?.actors[0]?.state !== 'READY') return false;
        return true;
      },
      SETTLE_MS,
      100,
    );
  }

  /** Probes every deployment, member, the graph and the class actor over the SDK, HTTP and gRPC; fails on any answer the model does not allow. */
  async probe(m: ModelState, when: string): Promise<void> {
    const grpc = grpcClient(this.cluster.grpcAddress);
    try {
      const check = (name: string, door: string, p: Probe, allowed: Map<string, string>) => {
        // The SDK names a version only for a split deployment; HTTP and gRPC name "1" for anything else.
        const version = p.version === undefined || p.version === '' ? '1' : p.version;
        const files = allowed.get(version)?.split(' or ') ?? [];
        assert.ok(
          files.includes(p.model),
          `${when}: ${door} answer of '${name}' named version '${p.version}' and came from ${p.model}; the model allows ${JSON.stringify([...allowed])}`,
        );
      };
      const targets = [...m.deployments].filter(([, d]) => d.kind !== 'mux').map(([name]) => name);
      if (m.graph) targets.push('g');
      for (const name of targets) {
        const allowed = allowedAnswers(m, name);
        const sdk = name === 'g' && m.deployments.get(m.graph!.over)?.kind === 'split' ? allowedByFile(allowed) : allowed;
        for (let i = 0; i < 3; i++) check(name, 'SDK', await probeSdk(this.client, this.answers, name), sdk);
        for (let i = 0; i < 2; i++)
          check(name, 'HTTP', await probeHttp(this.cluster.url, this.answers, name), name === 'g' ? sdk : allowed);
        for (let i = 0; i < 2; i++) check(name, 'gRPC', await probeGrpc(grpc, this.answers, name), name === 'g' ? sdk : allowed);
      }
      for (const [name, d] of m.deployments) {
        if (d.kind !== 'mux') continue;
        for (const [member, file] of Object.entries(d.members)) {
          const out = await this.client.run(name, probeInput(), { model: member, timeoutMs: 30_000 });
          assert.equal(whichModel(this.answers, out.logits!.data as Float32Array), file, `${when}: member '${member}' of '${name}'`);
          const http = await probeHttp(this.cluster.url, this.answers, `${name}:${member}`);
          assert.equal(http.model, file, `${when}: HTTP answer of member '${member}' of '${name}'`);
        }
      }
      if (m.counter) {
        const total = await this.counterCall(m, 'total');
        assert.equal(total, m.counter.total, `${when}: the class actor's total`);
        // The call's answer carried a checkpoint: the head holds one again (after a head restart too).
        m.counter.checkpointed = true;
      }
    } finally {
      grpc.close();
    }
  }
}

/**
 * A graph step over a split deployment runs whichever version the split picks, and the graph's
 * answer names none of them (it is the graph's, version "1"): any of the files may answer.
 */
function allowedByFile(allowed: Map<string, string>): Map<string, string> {
  const files = [...new Set(allowed.values())];
  return new Map(files.length === 1 ? [['1', files[0]!]] : [['1', files.join(' or ')]]);
}

export type { DeploymentRef };
