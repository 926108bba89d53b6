import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { writeExampleModels } from '../../models/index.js';
import { model, pipeline, tensor } from '../../runtime/internal.js';
import type { ActorView, ClusterView, DeploymentView } from '../../runtime/internal.js';
import type { LoadStats, LoadTarget, PlainTensor } from '../fixtures/netns-client.js';
import { isAlive, waitFor } from '../helpers/cluster.js';
import { writeGraphModels } from '../helpers/graphs.js';
import { NetLab, namespacesUnavailable } from '../helpers/netns.js';
import type { NsProcess } from '../helpers/netns.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { childEnv } from '../helpers/env.js';

/**
 * Across machines: a head and two agents, each in its own network namespace with its own address
 * on a private bridge (made here, torn down after), and an SDK client in a fourth. Deploys a model
 * and a graph with replicas on both agents, runs them across the hosts, cuts one agent's cable
 * while requests flow, and restores it. Needs root for `ip netns`; skipped (with the reason)
 * where namespaces cannot be made.
 */

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const CLIENT = fileURLToPath(new URL('../fixtures/netns-client.js', import.meta.url));
const TOKEN = 'multihost-token-5c1e9a';
const SUBNET = '10.87.0';
const HEAD_IP = `${SUBNET}.1`;
const A_IP = `${SUBNET}.11`;
/** A second address of host a, which its agent advertises: not the one its connections come from. */
const A_ADVERTISED = `${SUBNET}.21`;
const B_IP = `${SUBNET}.12`;
const CLIENT_IP = `${SUBNET}.100`;
const HEAD_URL = `http://${HEAD_IP}:8470`;

const unavailable = await namespacesUnavailable();

/** The test process's end of the SDK client running in the client namespace. */
class Driver {
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #next = 0;

  constructor(readonly child: NsProcess) {
    child.process.on('message', (raw) => {
      const m = raw as { id: number; value?: unknown; error?: { code: string; message: string } };
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (m.error) p.reject(Object.assign(new Error(`${m.error.code}: ${m.error.message}`), { code: m.error.code }));
      else p.resolve(m.value);
    });
  }

  call<T>(op: string, args: Record<string, unknown> = {}, timeoutMs = 60_000): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`client op '${op}' got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v as T)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.child.process.send({ id, op, args });
    });
  }

  describe(): Promise<ClusterView> {
    return this.call<ClusterView>('describe');
  }
}

function plainOf(t: { shape: readonly number[]; data: unknown }): PlainTensor {
  return { shape: [...t.shape], data: [...(t.data as Float32Array)] };
}

const nodeState = (view: ClusterView, name: string) => view.nodes.find((n) => n.name === name)?.state;
const actorsOf = (view: ClusterView, deployment: string): ActorView[] => view.deployments.find((d) => d.name === deployment)?.actors ?? [];

// Where namespaces cannot be made the test is reported as skipped, with the reason, not passed.
if (unavailable) test('across machines: head and agents in their own network namespaces', (t) => t.skip(unavailable));
else
  describe('across machines: head and agents in their own network namespaces', { timeout: 420_000 }, () => {
    let lab: NetLab | undefined;
    let work: string;
    let driver: Driver;
    const agents: Record<string, NsProcess> = {};
    const x = seededFloats(3 * 64, 21);
    const xPlain: PlainTensor = { shape: [3, 64], data: [...x] };
    let expectedModel: Record<string, number[]>;
    let expectedChain: Record<string, number[]>;
    let onA: ActorView[] = [];
    let head: NsProcess | undefined;
    /** Tests that ran to their end; fewer than all of them and the processes' stderr is printed. */
    let finished = 0;

    const env = () => {
      const e: NodeJS.ProcessEnv = childEnv();
      delete e.TROUPE_TOKEN;
      return e;
    };
    const startAgent = (host: string, name: string, extra: string[]) =>
      lab!.start(
        host,
        CLI,
        [
          'agent',
          '--head',
          `ws://${HEAD_IP}:8470`,
          '--token',
          TOKEN,
          '--name',
          name,
          '--model-dir',
          work,
          '--cpus',
          '8',
          '--heartbeat-ms',
          '250',
          '--state-dir',
          join(work, `state-${name}`),
          ...extra,
        ],
        /joined/,
        30_000,
        env(),
      );

    before(async () => {
      lab = await NetLab.create();
      await lab.addHost('head', HEAD_IP);
      await lab.addHost('a', A_IP);
      await lab.addAddress('a', A_ADVERTISED);
      await lab.addHost('b', B_IP);
      await lab.addHost('client', CLIENT_IP);

      work = await mkdtemp(join(tmpdir(), 'troupe-multihost-'));
      const models = await writeExampleModels(work);
      await writeGraphModels(work);
      const local = await runInProcess(models.mlp, { x: tensor('float32', [3, 64], x) });
      expectedModel = { logits: plainOf(local.logits!).data };
      const link = await runInProcess(join(work, 'link21.onnx'), { x: tensor('float32', [3, 64], x) });
      const chained = await runInProcess(join(work, 'member11.onnx'), { x: link.logits! });
      expectedChain = { logits: plainOf(chained.logits!).data };

      head = lab.start(
        'head',
        CLI,
        [
          'head',
          '--host',
          HEAD_IP,
          '--port',
          '8470',
          '--token',
          TOKEN,
          '--suspect-after-ms',
          '1500',
          '--dead-after-ms',
          '4000',
          '--data-dir',
          join(work, 'head'),
        ],
        /listening on (\S+)/,
        30_000,
        env(),
      );
      assert.equal(await head.line, HEAD_URL);
      // Agent a says where it is reachable; agent b leaves it to the head (the connection's source).
      agents.a = startAgent('a', 'agent-a', ['--advertise', A_ADVERTISED]);
      agents.b = startAgent('b', 'agent-b', []);
      await Promise.all([agents.a.line, agents.b.line]);
      const client = lab.start('client', CLIENT, [], /netns-client ready/, 30_000, env());
      await client.line;
      driver = new Driver(client);
      await driver.call('connect', { url: HEAD_URL, token: TOKEN });
    });

    after(async () => {
      await lab?.destroy();
      if (finished < 4 || process.env.TROUPE_TEST_LOGS) {
        for (const [name, p] of Object.entries({ head, ...agents }))
          if (p) process.stderr.write(`--- ${name} stderr (last 8 KiB) ---\n${p.stderr()}\n`);
      }
      if (work) await rm(work, { recursive: true, force: true });
    });

    test('each host has its own address; only callers with the token get in', async () => {
      const view = await driver.describe();
      const addresses = Object.fromEntries(view.nodes.map((n) => [n.name, [n.state, n.address]]));
      assert.deepEqual(
        addresses,
        { 'agent-a': ['ALIVE', A_ADVERTISED], 'agent-b': ['ALIVE', B_IP] },
        'the advertised address, or else the one the agent connected from',
      );

      await assert.rejects(driver.call('tryConnect', { url: HEAD_URL, token: 'not-the-token' }), /TROUPE_ERR_UNAUTHORIZED/);
      const intruder = lab!.start(
        'client',
        CLI,
        ['agent', '--head', `ws://${HEAD_IP}:8470`, '--name', 'intruder', '--model-dir', work, '--state-dir', join(work, 'state-intruder')],
        /joined/,
        30_000,
        env(),
      );
      const refused = await intruder.exited;
      assert.equal(refused.code, 1, intruder.stderr());
      assert.match(intruder.stderr(), /TROUPE_ERR_UNAUTHORIZED: head refused this agent: missing or wrong cluster token/);
      assert.deepEqual((await driver.describe()).nodes.map((n) => n.name).sort(), ['agent-a', 'agent-b']);

      const open = lab!.start(
        'head',
        CLI,
        ['head', '--host', HEAD_IP, '--port', '8471', '--data-dir', join(work, 'head2')],
        /listening/,
        30_000,
        env(),
      );
      const exit = await open.exited;
      assert.equal(exit.code, 2, 'a head on a non-loopback address refuses to start without a token');
      assert.match(open.stderr(), /refusing to listen on 10\.87\.0\.1 without a cluster token/);
      finished++;
    });

    test('a model and a graph with replicas on both agents answer across the hosts', async () => {
      await driver.call('deploy', { spec: { name: 'mlp', model: 'mlp.onnx', replicas: 2, threads: 1 } });
      const chain = pipeline('chain', [
        model('link21', { path: 'link21.onnx', replicas: 2, threads: 1 }),
        model('member11', { path: 'member11.onnx', replicas: 2, threads: 1 }),
      ]);
      await driver.call('deploy', { spec: chain.toJSON() });
      const view = await driver.describe();
      for (const name of ['mlp', 'link21', 'member11']) {
        const actors = actorsOf(view, name);
        assert.deepEqual(
          actors.map((a) => [a.state, a.node]).sort(),
          [
            ['READY', 'agent-a'],
            ['READY', 'agent-b'],
          ],
          `${name}: one replica on each host`,
        );
      }
      assert.deepEqual(await driver.call('run', { deployment: 'mlp', x: xPlain }), {
        logits: { shape: [3, 10], data: expectedModel.logits },
      });
      assert.deepEqual(await driver.call('run', { deployment: 'chain', x: xPlain }), {
        logits: { shape: [3, 10], data: expectedChain.logits },
      });

      // HTTP across hosts: inference on a head that listens beyond loopback needs the token.
      const body = JSON.stringify({ inputs: [{ name: 'x', shape: [3, 64], datatype: 'FP32', data: xPlain.data }] });
      const headers = { 'content-type': 'application/json' };
      const denied = await driver.call<{ status: number; body: string }>('http', {
        url: `${HEAD_URL}/v2/models/mlp/infer`,
        method: 'POST',
        headers,
        body,
      });
      assert.equal(denied.status, 401, denied.body);
      const served = await driver.call<{ status: number; body: string }>('http', {
        url: `${HEAD_URL}/v2/models/mlp/infer`,
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${TOKEN}` },
        body,
      });
      assert.equal(served.status, 200, served.body);
      assert.deepEqual((JSON.parse(served.body) as { outputs: { data: number[] }[] }).outputs[0]?.data, expectedModel.logits);
      finished++;
    });

    test("cutting an agent's link while requests flow: SUSPECT, then DEAD; its actors come up on the other host", async () => {
      const targets: LoadTarget[] = [
        { deployment: 'mlp', x: xPlain, expected: expectedModel },
        { deployment: 'chain', x: xPlain, expected: expectedChain },
      ];
      await driver.call('startLoad', { targets, concurrency: 4 });
      await waitFor('requests to flow', async () => (await driver.call<LoadStats>('stats')).ok >= 40, 30_000);
      const before = await driver.describe();
      onA = before.deployments.flatMap((d) => d.actors).filter((a) => a.node === 'agent-a');
      assert.equal(onA.length, 3, 'one replica of each deployment on agent-a');

      await lab!.cut('a');
      const seen = new Set<string>();
      await waitFor(
        'agent-a to be DEAD',
        async () => {
          const state = nodeState(await driver.describe(), 'agent-a');
          if (state) seen.add(state);
          return state === 'DEAD';
        },
        30_000,
        100,
      );
      const events = (await driver.describe()).events ?? [];
      const about = (kind: string) => events.some((e) => e.kind === kind && e.message.includes('agent-a'));
      assert.ok(seen.has('SUSPECT') || about('node-suspect'), `agent-a went SUSPECT before DEAD (saw ${[...seen].join(', ')})`);
      assert.ok(about('node-lost'), 'the DEAD node is in the cluster events');
      assert.equal(nodeState(await driver.describe(), 'agent-b'), 'ALIVE');

      const moved = await waitFor(
        'every replica to be READY on agent-b',
        async () => {
          const view = await driver.describe();
          const all = view.deployments.flatMap((d: DeploymentView) => d.actors);
          return all.length === 6 && all.every((a) => a.state === 'READY' && a.node === 'agent-b') ? view : undefined;
        },
        90_000,
        200,
      );
      for (const a of onA) {
        const now = moved.deployments.flatMap((d) => d.actors).find((b) => b.id === a.id);
        assert.ok(now && now.pid !== a.pid, `${a.name} runs as a new process on agent-b`);
      }
      const at = (await driver.call<LoadStats>('stats')).ok;
      await waitFor(
        'requests to keep flowing on the remaining host',
        async () => (await driver.call<LoadStats>('stats')).ok >= at + 40,
        30_000,
      );
      finished++;
    });

    test('restoring the link reconciles the cluster: the node is ALIVE, its stale actors are stopped, and no request was lost', async () => {
      const onB = (await driver.describe()).deployments.flatMap((d) => d.actors).map((a) => [a.id, a.pid, a.restarts]);
      await lab!.restore('a');
      await waitFor('agent-a to rejoin ALIVE', async () => nodeState(await driver.describe(), 'agent-a') === 'ALIVE', 120_000, 250);
      await waitFor(
        "agent-a's stale actor processes to be stopped",
        () => onA.every((a) => a.pid === null || !isAlive(a.pid)),
        60_000,
        250,
      );
      const view = await driver.describe();
      assert.deepEqual(
        view.deployments.flatMap((d) => d.actors).map((a) => [a.id, a.pid, a.restarts]),
        onB,
        'the replicas on agent-b were left alone: same processes, no restart counted',
      );
      for (const d of view.deployments) assert.equal(d.state, 'READY', d.name);

      const stats = await driver.call<LoadStats>('stopLoad', {}, 120_000);
      assert.equal(stats.failed, 0, `no request failed: ${JSON.stringify(stats.errors)}`);
      assert.equal(stats.mismatches, 0, 'every answer had the right numbers');
      assert.equal(stats.inFlight, 0);
      assert.equal(stats.ok, stats.started, 'every request sent was answered');
      assert.ok(stats.ok > 80, `${stats.ok} requests answered`);

      // The node takes work again: a third replica goes to it (spread), and serves.
      await driver.call('deploy', { spec: { name: 'mlp', model: 'mlp.onnx', replicas: 3, threads: 1 }, replace: true });
      const scaled = actorsOf(await driver.describe(), 'mlp');
      assert.deepEqual(scaled.map((a) => a.node).sort(), ['agent-a', 'agent-b', 'agent-b']);
      assert.ok(scaled.every((a) => a.state === 'READY'));
      assert.deepEqual(await driver.call('run', { deployment: 'mlp', x: xPlain }), {
        logits: { shape: [3, 10], data: expectedModel.logits },
      });
      finished++;
    });
  });
