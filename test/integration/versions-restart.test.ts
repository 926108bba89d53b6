import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { stopChild } from '../../cli/children.js';
import { grpcClient } from '../helpers/grpc-client.js';
import { probeGenerate, probeGrpc, probeHttp, probeSdk, writeDistinctMlps } from '../helpers/version-probes.js';
import type { ModelAnswers, Probe } from '../helpers/version-probes.js';

/**
 * Versions x restarts (issue 38): a deployment split between versions, or one promoted, serves
 * exactly what its spec says after the head is killed, stopped, or stopped together with its
 * agent and started again on the same data directory. The head once restored such a deployment
 * with a replica of its own (`ab#0`, running the spec's `model`) that answered most calls as if
 * it were a version; every answer here is checked for the model that produced it and the version
 * it names, over the SDK, HTTP, gRPC and generate.
 */
describe('versions through head restarts', { timeout: 300_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let answers: ModelAnswers;
  const agentArgs = ['--name', 'n1', '--cpus', '8', '--heartbeat-ms', '200'];
  /** Per deployment: version -> the model file it runs, as its spec says now. */
  const expected: Record<string, Record<string, string>> = {
    ab: { v1: 'mlp-0.onnx', v2: 'mlp-1.onnx' },
    pro: { new: 'mlp-1.onnx' },
  };

  const put = async (name: string, body: unknown) => {
    const res = await fetch(`${cluster.url}/api/v1/deployments/${name}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.ok(res.status < 300, await res.text());
  };

  before(async () => {
    cluster = await startCluster({ agents: [agentArgs] });
    ({ answers } = await writeDistinctMlps(cluster.modelDir, 2));
    client = await connect(cluster.url, { retries: 40 });
    const split = (names: [string, string]) => ({
      cpus: 0.25,
      threads: 1,
      versions: [
        { version: names[0], model: 'mlp-0.onnx', weight: 50 },
        { version: names[1], model: 'mlp-1.onnx', weight: 50 },
      ],
    });
    await put('ab', split(['v1', 'v2']));
    await put('pro', split(['old', 'new']));
    const promoted = await fetch(`${cluster.url}/api/v1/deployments/pro/promote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ version: 'new' }),
    });
    assert.equal(promoted.status, 200, await promoted.text());
    await waitFor('pro.old to stop', async () => !(await client.describe()).deployments.some((d) => d.name === 'pro.old'), 60_000);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  /** Every version READY, and nothing else running: the split deployments have no replica of their own. */
  const settled = () =>
    waitFor(
      'every version READY and no replica of a split deployment itself',
      async () => {
        const view = await client.describe();
        const running = view.deployments.flatMap((d) => d.actors.filter((a) => a.state !== 'DEAD').map((a) => a.name)).sort();
        const wanted = Object.entries(expected)
          .flatMap(([name, versions]) => Object.keys(versions).map((v) => `${name}.${v}#0`))
          .sort();
        const ready = view.deployments.filter((d) => d.name in expected).every((d) => d.state === 'READY');
        return ready && JSON.stringify(running) === JSON.stringify(wanted) ? running : undefined;
      },
      60_000,
    );

  /** Answers from every door: each from a version the spec lists, naming that version. */
  async function checkAnswers(when: string): Promise<void> {
    const grpc = grpcClient(cluster.grpcAddress);
    try {
      for (const [name, versions] of Object.entries(expected)) {
        const seen = new Set<string>();
        const check = (door: string, p: Probe) => {
          const version = p.version ?? '(none)';
          assert.equal(
            versions[version],
            p.model,
            `${when}: ${door} answer of '${name}' named version ${version} but came from ${p.model}`,
          );
          seen.add(version);
        };
        for (let i = 0; i < 12; i++) {
          check('SDK', await probeSdk(client, answers, name));
          check('HTTP', await probeHttp(cluster.url, answers, name));
          check('gRPC', await probeGrpc(grpc, answers, name));
        }
        for (let i = 0; i < 4; i++) check('generate', await probeGenerate(cluster.url, answers, name));
        assert.deepEqual([...seen].sort(), Object.keys(versions).sort(), `${when}: every version of '${name}' answers its share`);
      }
    } finally {
      grpc.close();
    }
  }

  test('before any restart: each answer names the version that ran it, unpinned too', async () => {
    await settled();
    await checkAnswers('before a restart');
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`${signal} to the head: the same versions answer, and no replica of the split deployment appears`, async () => {
      await cluster.restartHead(signal);
      await settled();
      await checkAnswers(`after ${signal}`);
    });
  }

  test('head and agent stopped and started on the same data directory (as `troupe up` twice): the same versions answer', async () => {
    await Promise.all(cluster.agents.map((a) => stopChild(a, 10_000)));
    await cluster.restartHead('SIGTERM');
    await cluster.startAgent(agentArgs);
    await settled();
    await checkAnswers('after a stop and a start');
  });

  test('a rollout changed between restarts is kept as changed: weights, and a version added', async () => {
    await put('ab', {
      cpus: 0.25,
      threads: 1,
      versions: [
        { version: 'v1', model: 'mlp-0.onnx', weight: 0 },
        { version: 'v2', model: 'mlp-1.onnx', weight: 100 },
      ],
    });
    expected.ab = { v2: 'mlp-1.onnx' };
    await cluster.restartHead('SIGKILL');
    // v1 at weight 0 keeps its replica, warm; it takes no call.
    await waitFor(
      'ab.v1 and ab.v2 READY',
      async () => {
        const names = (await client.describe()).deployments.filter((d) => d.state === 'READY').map((d) => d.name);
        return names.includes('ab.v1') && names.includes('ab.v2');
      },
      60_000,
    );
    await checkAnswers('after a restart with v1 at weight 0');
  });

  test('an update caught mid-surge by a head restart: the replaced replica serves as such, never as the new spec, until the new one is READY', async () => {
    await put('sw', { model: 'mlp-0.onnx', cpus: 0.25, threads: 1 });
    // The new spec needs a GPU, which no node has yet: the update surges and waits for one.
    const updated = await fetch(`${cluster.url}/api/v1/deployments/sw?wait=false`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mlp-1.onnx', cpus: 0.25, threads: 1, gpus: 1 }),
    });
    assert.equal(updated.status, 202, await updated.text());
    const models = async (n: number) => {
      const seen = new Set<string>();
      for (let i = 0; i < n; i++) {
        seen.add((await probeSdk(client, answers, 'sw')).model);
        seen.add((await probeHttp(cluster.url, answers, 'sw')).model);
      }
      return [...seen].sort();
    };
    assert.deepEqual(await models(4), ['mlp-0.onnx'], 'the replaced replica serves while the new one waits');
    await cluster.restartHead('SIGKILL');
    await waitFor('sw served again after the head restart', () => models(1).catch(() => undefined), 60_000);
    assert.deepEqual(await models(4), ['mlp-0.onnx'], 'after the restart, still the replaced replica, as such');
    // A node with a GPU: the new spec's replica starts there, and the replaced one goes once it is READY.
    await cluster.startAgent(['--name', 'gpu', '--cpus', '8', '--simulate-gpus', '1', '--heartbeat-ms', '200']);
    await waitFor(
      'sw to run only its new spec',
      async () => {
        const sw = (await client.describe()).deployments.find((d) => d.name === 'sw');
        return sw?.actors.length === 1 && sw.actors[0]!.state === 'READY' && sw.actors[0]!.node === 'gpu';
      },
      60_000,
    );
    assert.deepEqual(await models(6), ['mlp-1.onnx'], 'the new spec answers, and only it');
    assert.equal((await fetch(`${cluster.url}/api/v1/deployments/sw`, { method: 'DELETE' })).status, 200);
  });
});
