import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { TroupeError, connect, ensemble, model, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';

/**
 * One deployments service (head/control/deployments.ts) behind every entry point: the SDK's frames, HTTP
 * and the CLI (through HTTP) follow the same rules for graphs and models, checked here side by
 * side with the same steps. Only replacing differs, by design: an SDK deploy asks for it, a PUT
 * (and so the CLI) is declarative and replaces, saying so.
 */

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const ROW = Array.from({ length: 64 }, (_, i) => Math.sin(i) / 2);

/** What an entry point answered: ok, or the error's code and message. */
interface Outcome {
  ok: boolean;
  code?: string;
  message: string;
}

interface EntryPoint {
  deploy(spec: Record<string, unknown>): Promise<Outcome>;
  /** Runs `name` on one row of x; the message holds the logits' first value, to 4 places. */
  run(name: string): Promise<Outcome>;
  remove(name: string, force?: boolean): Promise<Outcome>;
}

function troupe(args: string[]): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000, env: childEnv() });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) return resolve({ ok: true, message: out });
      const match = /troupe: (TROUPE_ERR_[A-Z_]+): (.*)/s.exec(err);
      resolve({ ok: false, code: match?.[1] ?? `exit ${code}`, message: match?.[2] ?? err });
    });
  });
}

function entryPoints(cluster: TestCluster, client: Cluster): Record<string, EntryPoint> {
  const sdk = async (work: Promise<unknown>): Promise<Outcome> => {
    try {
      await work;
      return { ok: true, message: '' };
    } catch (err) {
      if (!(err instanceof TroupeError)) throw err;
      return { ok: false, code: err.code, message: err.message };
    }
  };
  const http = async (method: string, path: string, body?: unknown): Promise<Outcome> => {
    const answer = await call(
      cluster.url,
      method,
      path,
      body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } },
    );
    const json = answer.json as { code?: string; error?: string; replaced?: string } | undefined;
    if (answer.status < 300) return { ok: true, message: json?.replaced ?? '' };
    return { ok: false, code: json?.code ?? `HTTP ${answer.status}`, message: json?.error ?? '' };
  };
  let files = 0;
  const request = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64], data: ROW }] };
  return {
    sdk: {
      deploy: (spec) => sdk(client.deploy(spec as never)),
      async run(name) {
        const out = await client.run(name, { x: tensor('float32', [1, 64], Float32Array.from(ROW)) });
        return { ok: true, message: (out.logits!.data as Float32Array)[0]!.toFixed(4) };
      },
      remove: (name, force) => sdk(client.undeploy(name, force ? { force } : {})),
    },
    http: {
      deploy: (spec) => http('PUT', `/api/v1/deployments/${String(spec.graph ?? spec.name)}`, spec),
      async run(name) {
        const answer = await call(cluster.url, 'POST', `/v2/models/${name}/infer`, {
          body: JSON.stringify(request),
          headers: { 'content-type': 'application/json' },
        });
        const out = answer.json as { outputs: { data: number[] }[] };
        return { ok: answer.status === 200, message: out.outputs[0]!.data[0]!.toFixed(4) };
      },
      remove: (name, force) => http('DELETE', `/api/v1/deployments/${name}${force ? '?force=true' : ''}`),
    },
    cli: {
      async deploy(spec) {
        const file = join(cluster.modelDir, `spec-${files++}.json`);
        await writeFile(file, JSON.stringify(spec));
        return troupe(['deploy', file, '--head', cluster.url]);
      },
      remove: (name, force) => troupe(['delete', name, '--head', cluster.url, ...(force ? ['--force'] : [])]),
      async run(name) {
        const file = join(cluster.modelDir, `request-${files++}.json`);
        await writeFile(file, JSON.stringify(request));
        const outcome = await troupe(['infer', name, file, '--head', cluster.url]);
        // `logits FP32[1,10] = [0.1234, …]`
        return { ...outcome, message: /^logits FP32\[1,10\] = \[(-?[\d.]+)/.exec(outcome.message)?.[1] ?? outcome.message };
      },
    },
  };
}

/** A graph of two MLPs (a quarter CPU each) averaged, named after the entry point that deploys it. */
function pairGraph(suffix: string): Record<string, unknown> {
  const member = (name: string) => model(`${name}-${suffix}`, { path: 'mlp.onnx', cpus: 0.25, threads: 1 });
  return ensemble(`pair-${suffix}`, [member('left'), member('right')], { combine: 'mean' }).toJSON() as unknown as Record<string, unknown>;
}

async function savedGraphs(cluster: TestCluster): Promise<string[]> {
  const saved = JSON.parse(await readFile(join(cluster.dataDir, 'state.json'), 'utf8')) as { graphs: { name: string }[] };
  return saved.graphs.map((g) => g.name).sort();
}

describe('deployments: the SDK, HTTP and the CLI follow one set of rules', { timeout: 240_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let points: Record<string, EntryPoint>;
  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'd1', '--cpus', '2']] });
    client = await connect(cluster.url);
    points = entryPoints(cluster, client);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  for (const via of ['sdk', 'http', 'cli']) {
    test(`${via}: a graph deploys, is kept in the state file, refuses a model of its name, protects its models from deletion, and deletes`, async () => {
      const ep = points[via]!;
      const graph = `pair-${via}`;
      const deployed = await ep.deploy(pairGraph(via));
      assert.ok(deployed.ok, `${via} graph deploy: ${deployed.code} ${deployed.message}`);
      assert.ok(
        (await client.describe()).graphs?.some((g) => g.name === graph),
        'the graph is registered',
      );
      await waitFor(`graph '${graph}' in the state file`, async () => (await savedGraphs(cluster)).includes(graph));
      // Runnable through this entry point, with the answer every other one gives.
      const ran = await ep.run(graph);
      assert.ok(ran.ok, `${via} run: ${ran.code} ${ran.message}`);
      assert.equal(Number(ran.message), Number((await points.sdk!.run(graph)).message));

      const clash = await ep.deploy({ name: graph, model: 'mlp.onnx', cpus: 0.25, threads: 1 });
      assert.equal(clash.code, 'TROUPE_ERR_BAD_SPEC', clash.message);
      assert.match(clash.message, new RegExp(`'${graph}' is a graph`));

      const inUse = await ep.remove(`left-${via}`);
      assert.equal(inUse.code, 'TROUPE_ERR_DEPLOYMENT_IN_USE', inUse.message);
      assert.match(inUse.message, new RegExp(`deployment 'left-${via}' is used by graph '${graph}'`));
      assert.ok(
        (await client.describe()).deployments.some((d) => d.name === `left-${via}`),
        'the refused delete changed nothing',
      );

      const removed = await ep.remove(graph);
      assert.ok(removed.ok, `${via} graph delete: ${removed.code} ${removed.message}`);
      const after = await client.describe();
      assert.ok(!after.graphs?.some((g) => g.name === graph), 'the graph is gone');
      assert.ok(
        after.deployments.some((d) => d.name === `left-${via}`),
        "the graph's models stay",
      );
      await waitFor(`graph '${graph}' out of the state file`, async () => !(await savedGraphs(cluster)).includes(graph));

      // With the graph gone its models delete without force; a graph deployed again is forced past.
      assert.ok((await ep.remove(`right-${via}`)).ok);
      assert.ok((await ep.deploy(pairGraph(via))).ok);
      const forced = await ep.remove(`left-${via}`, true);
      assert.ok(forced.ok, `${via} forced delete: ${forced.code} ${forced.message}`);
      assert.ok(!(await client.describe()).deployments.some((d) => d.name === `left-${via}`));
      const broken = await call(cluster.url, 'POST', `/v2/models/${graph}/infer`, {
        body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64], data: new Array(64).fill(0) }] }),
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(broken.status, 404, 'a graph whose model was deleted by force fails until it is deployed again');
      assert.match(JSON.stringify(broken.json), new RegExp(`left-${via}`));
      assert.ok((await ep.remove(graph)).ok);
      assert.ok((await ep.remove(`right-${via}`)).ok);

      const unknown = await ep.remove(`nothing-${via}`);
      assert.equal(unknown.code, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', unknown.message);
    });
  }

  test('a READY deployment with a different spec: the SDK replaces it only when asked (replace or update), PUT and the CLI replace it and say so', async () => {
    const spec = { name: 'one', model: 'mlp.onnx', cpus: 0.25, threads: 1 };
    assert.ok((await points.sdk!.deploy(spec)).ok);
    assert.ok((await points.sdk!.deploy(spec)).ok, 'the same spec again changes nothing and needs nothing');

    const refused = await points.sdk!.deploy({ ...spec, cpus: 0.5 });
    assert.equal(refused.code, 'TROUPE_ERR_DEPLOYMENT_EXISTS', refused.message);
    assert.match(refused.message, /READY deployment 'one' \(cpus: 0\.25 -> 0\.5\).*replace: true.*update/);
    const cpus = async () => ((await call(cluster.url, 'GET', '/api/v1/deployments/one')).json as { spec: { cpus: number } }).spec.cpus;
    assert.equal(await cpus(), 0.25, 'the refused deploy changed nothing');

    await client.update({ ...spec, cpus: 0.5 });
    assert.equal(await cpus(), 0.5);
    await client.deploy({ ...spec, cpus: 0.3 }, { replace: true });

    const put = await points.http!.deploy({ ...spec, cpus: 0.4 });
    assert.ok(put.ok, put.message);
    assert.match(put.message, /replacing the READY deployment 'one' \(cpus: 0\.3 -> 0\.4\)/);
    const cli = await points.cli!.deploy({ ...spec, cpus: 0.25 });
    assert.ok(cli.ok, cli.message);
    assert.match(cli.message, /replacing the READY deployment 'one' \(cpus: 0\.4 -> 0\.25\)/);

    // A graph that would change a READY model it shares is refused the same way through the SDK.
    const graph = ensemble(
      'uses-one',
      [model('one', { path: 'mlp.onnx', cpus: 0.5, threads: 1 }), model('two', { path: 'mlp.onnx', cpus: 0.25, threads: 1 })],
      { combine: 'mean' },
    );
    await assert.rejects(
      client.deploy(graph),
      (err: unknown) =>
        err instanceof TroupeError && err.code === 'TROUPE_ERR_DEPLOYMENT_EXISTS' && /'one' \(cpus: 0\.25 -> 0\.5\)/.test(err.message),
    );
    assert.ok(!(await client.describe()).deployments.some((d) => d.name === 'two'), 'the refused graph deployed none of its models');
    await client.undeploy('one');
  });
});
