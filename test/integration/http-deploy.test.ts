import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateSync, gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import type { ClusterView, DeploymentView } from '../../runtime/internal.js';
import { isAlive, startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertError, call } from '../helpers/http.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const JSON_HEADERS = { 'content-type': 'application/json' };

type Detail = DeploymentView & { spec: Record<string, unknown> };

/** Runs the CLI as a person would, bounded in time. */
function troupe(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { timeout: 60_000, env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

describe('HTTP: deployments, cluster, docs, and the deploy/status CLI', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  const put = (name: string, body: string, headers: Record<string, string> = JSON_HEADERS, query = '') =>
    call(cluster.url, 'PUT', `/api/v1/deployments/${name}${query}`, { body, headers });
  const get = async (name: string) => (await call(cluster.url, 'GET', `/api/v1/deployments/${name}`)).json as Detail;

  before(async () => {
    // Room for every replica these tests start at once (each asks for one CPU).
    cluster = await startCluster({ agents: [['--cpus', '16']] });
  });
  after(async () => {
    await cluster?.stop();
  });

  test('PUT creates a deployment and answers once READY; the same PUT again changes nothing', async () => {
    const first = await put('mlp', JSON.stringify({ model: 'mlp.onnx', threads: 1 }));
    assert.equal(first.status, 201, first.body.toString());
    const view = first.json as Detail;
    assert.equal(view.state, 'READY');
    assert.equal(view.actors.length, 1);
    assert.equal(view.actors[0]!.state, 'READY');
    assert.equal(view.spec.model, 'mlp.onnx');
    assert.equal(view.spec.replicas, 1, 'defaults filled in');

    const again = await put('mlp', JSON.stringify({ name: 'mlp', model: 'mlp.onnx', threads: 1 }));
    assert.equal(again.status, 200);
    const same = again.json as Detail;
    assert.deepEqual(
      same.actors.map((a) => [a.id, a.pid]),
      view.actors.map((a) => [a.id, a.pid]),
      'the same actor process',
    );
  });

  test('a YAML body scales it; GET shows the tree down to each actor', async () => {
    const scaled = await put('mlp', 'model: mlp.onnx\nthreads: 1\nreplicas: 2\n', { 'content-type': 'application/yaml' });
    assert.equal(scaled.status, 200, scaled.body.toString());
    const view = await get('mlp');
    assert.equal(view.state, 'READY');
    assert.equal(view.replicas, 2);
    assert.deepEqual(view.actors.map((a) => a.name).sort(), ['mlp#0', 'mlp#1']);
    for (const a of view.actors) {
      assert.equal(a.state, 'READY');
      assert.equal(a.reason, null);
      assert.equal(typeof a.node, 'string');
      assert.equal(a.device, 'cpu');
      assert.ok(a.pid && isAlive(a.pid));
      assert.equal(a.restarts, 0);
    }
    const list = (await call(cluster.url, 'GET', '/api/v1/deployments')).json as { deployments: Detail[] };
    assert.deepEqual(
      list.deployments.map((d) => d.name),
      ['mlp'],
    );
  });

  test('a gzip or deflate spec is decoded as inference bodies are; another coding is 415', async () => {
    const spec = Buffer.from('model: mlp.onnx\nthreads: 1\nreplicas: 2\n');
    for (const [coding, body] of [
      ['gzip', gzipSync(spec)],
      ['deflate', deflateSync(spec)],
    ] as const) {
      const answer = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
        body,
        headers: { 'content-type': 'application/yaml', 'content-encoding': coding },
      });
      assert.equal(answer.status, 200, `${coding}: ${answer.body.toString()}`);
      assert.equal((await get('mlp')).replicas, 2);
    }
    const refused = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: spec,
      headers: { 'content-type': 'application/yaml', 'content-encoding': 'br' },
    });
    assertError(refused, 415, 'TROUPE_ERR_UNSUPPORTED_ENCODING', /Content-Encoding 'br' is not supported/);
    // The spec's bound holds for what a body decodes to: 300 KiB of YAML sent as a few hundred bytes of gzip.
    const bomb = await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
      body: gzipSync(Buffer.concat([spec, Buffer.alloc(300 * 1024, ' ')])),
      headers: { 'content-type': 'application/yaml', 'content-encoding': 'gzip' },
    });
    assertError(bomb, 413, 'TROUPE_ERR_SPEC_TOO_LARGE', /the deployment body is larger than 256 KiB/);
  });

  test('?wait=false answers 202 at once; the deployment becomes READY on its own', async () => {
    const answer = await put('cnn', JSON.stringify({ model: 'cnn.onnx', threads: 1 }), JSON_HEADERS, '?wait=false');
    assert.equal(answer.status, 202, answer.body.toString());
    assert.equal((answer.json as Detail).name, 'cnn');
    await waitFor('cnn to be READY', async () => (await get('cnn')).state === 'READY', 30_000);
  });

  test('bad deployment requests get 4xx and a JSON error naming the problem', async () => {
    assertError(
      await put('mlp', JSON.stringify({ name: 'other', model: 'mlp.onnx' })),
      400,
      'TROUPE_ERR_BAD_SPEC',
      /the body names deployment 'other' but the path names 'mlp'/,
    );
    assertError(await put('mlp', JSON.stringify({ model: 'mlp.onnx', replicas: 'two' })), 400, 'TROUPE_ERR_BAD_SPEC', /replicas/);
    assertError(await put('mlp', JSON.stringify({ model: 'mlp.onnx', colour: 'red' })), 400, 'TROUPE_ERR_BAD_SPEC', /colour/);
    assertError(await put('mlp', JSON.stringify([1])), 400, 'TROUPE_ERR_BAD_SPEC', /must be an object/);
    assertError(await put('mlp', '{"model": "mlp.onnx",'), 400, 'TROUPE_ERR_BAD_REQUEST', /the body is not valid JSON/);
    assertError(
      await put('bad%20name', JSON.stringify({ model: 'mlp.onnx' })),
      400,
      'TROUPE_ERR_BAD_SPEC',
      /deployment name 'bad name' is not allowed/,
    );
    assertError(
      await put('mlp', JSON.stringify({ model: 'mlp.onnx' }), JSON_HEADERS, '?wait=maybe'),
      400,
      'TROUPE_ERR_BAD_REQUEST',
      /\?wait must be true or false/,
    );
    assertError(
      await put('esc', JSON.stringify({ model: '../etc/passwd' })),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /model path '..\/etc\/passwd' is outside the agent's model directory/,
    );
    assertError(
      await put('gone', JSON.stringify({ model: 'missing.onnx' })),
      400,
      'TROUPE_ERR_MODEL_PATH',
      /model 'missing.onnx' not found/,
    );
    assertError(
      await call(cluster.url, 'GET', '/api/v1/deployments/nope'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /no deployment or graph named 'nope'/,
    );
    assertError(
      await call(cluster.url, 'DELETE', '/api/v1/deployments/nope'),
      404,
      'TROUPE_ERR_UNKNOWN_DEPLOYMENT',
      /no deployment or graph named 'nope' \(deployed: 'mlp', 'cnn'\)/,
    );
    // A refused deploy leaves nothing behind.
    for (const name of ['esc', 'gone']) assert.equal((await call(cluster.url, 'GET', `/api/v1/deployments/${name}`)).status, 404, name);
    assert.equal((await get('mlp')).state, 'READY', 'the good deployment is untouched');
  });

  test('DELETE drains and removes a deployment; its actor process exits', async () => {
    const pid = (await get('cnn')).actors[0]!.pid!;
    const answer = await call(cluster.url, 'DELETE', '/api/v1/deployments/cnn');
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.json, { name: 'cnn', kind: 'deployment', deleted: true });
    await waitFor('the cnn actor to exit', () => !isAlive(pid), 15_000);
    assert.equal((await call(cluster.url, 'GET', '/api/v1/deployments/cnn')).status, 404);
  });

  test('cluster, health and the OpenAPI description', async () => {
    const view = (await call(cluster.url, 'GET', '/api/v1/cluster')).json as ClusterView;
    assert.equal(view.nodes.length, 1);
    assert.equal(view.nodes[0]!.state, 'ALIVE');
    assert.deepEqual(
      view.deployments.map((d) => d.name),
      ['mlp'],
    );
    assert.deepEqual((await call(cluster.url, 'GET', '/healthz')).json, { status: 'ok' });
    assert.equal((await call(cluster.url, 'GET', '/readyz')).status, 200);

    const docs = await call(cluster.url, 'GET', '/docs');
    assert.equal(docs.status, 200);
    const doc = docs.json as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema?: { properties?: Record<string, unknown> } }> } }>
      >;
    };
    assert.equal(doc.openapi, '3.1.0');
    for (const path of [
      '/v2',
      '/v2/health/live',
      '/v2/models/{name}',
      '/v2/models/{name}/infer',
      '/api/v1/deployments/{name}',
      '/api/v1/models/{name}',
      '/api/v1/blobs/{sha256}',
      '/api/v1/cluster',
    ]) {
      assert.ok(doc.paths[path], `${path} is described`);
    }
    const deploySchema = doc.paths['/api/v1/deployments/{name}']!.put!.requestBody!.content['application/json']!.schema!;
    assert.ok(deploySchema.properties?.model, 'the deployment body schema comes from the zod spec');
    assert.deepEqual((await call(cluster.url, 'GET', '/docs/openapi.json')).json, docs.json);
  });

  test('troupe deploy FILE and troupe status are clients of the HTTP API', async () => {
    const yamlFile = join(cluster.modelDir, 'cli-mlp.yaml');
    await writeFile(yamlFile, 'name: cli-mlp\nmodel: mlp.onnx\nthreads: 1\n');
    const deployed = await troupe(['deploy', yamlFile, '--head', cluster.url]);
    assert.equal(deployed.code, 0, deployed.stderr);
    assert.match(deployed.stdout, /deployment 'cli-mlp' is READY: cli-mlp: 1\/1 READY · cli-mlp#0 READY on \S+ \(pid \d+\)/);

    const jsonFile = join(cluster.modelDir, 'later.json');
    await writeFile(jsonFile, JSON.stringify({ name: 'later', model: 'cnn.onnx', threads: 1 }));
    const accepted = await troupe(['deploy', '--no-wait', jsonFile, '--head', cluster.url]);
    assert.equal(accepted.code, 0, accepted.stderr);
    assert.match(accepted.stdout, /deployment 'later' accepted: later: \d\/1 READY/);

    const status = await troupe(['status', '--head', cluster.url]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^nodes \(1\):\n {2}\S+ +ALIVE/m);
    assert.match(status.stdout, /^ {2}cli-mlp +READY +1\/1 READY {2}model mlp\.onnx$/m);
    assert.match(status.stdout, /^ {4}cli-mlp#0 +READY +node \S+ {2}cpu {2}pid \d+ {2}restarts 0$/m);
    const json = await troupe(['status', '--json', '--head', cluster.url]);
    assert.ok((JSON.parse(json.stdout) as ClusterView).deployments.some((d) => d.name === 'cli-mlp'));

    const escape = join(cluster.modelDir, 'escape.yaml');
    await writeFile(escape, 'name: escape\nmodel: ../x.onnx\n');
    const refused = await troupe(['deploy', escape, '--head', cluster.url]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /TROUPE_ERR_MODEL_PATH: model path '..\/x.onnx' is outside/);
    await call(cluster.url, 'DELETE', '/api/v1/deployments/escape');
    await call(cluster.url, 'DELETE', '/api/v1/deployments/later');
  });

  test('the CLI refuses bad flags with TROUPE_ERR_BAD_FLAG (exit 2) and an unreachable head with exit 1', async () => {
    const cases: [string[], RegExp][] = [
      [['deploy'], /deploy: FILE is required/],
      [['deploy', 'a.yaml', 'b.yaml'], /one FILE only, got 2/],
      [['deploy', 'a.yaml', '--head', 'ftp://x'], /--head: must be an http:\/\//],
      [['deploy', join(cluster.modelDir, 'missing.yaml'), '--head', cluster.url], /cannot read FILE '.*missing.yaml'/],
      [['deploy', 'a.yaml', '--wait', '--no-wait'], /give --wait or --no-wait, not both/],
      [['status', '--bogus'], /Unknown option '--bogus'/],
    ];
    for (const [args, message] of cases) {
      const out = await troupe(args);
      assert.equal(out.code, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, /TROUPE_ERR_BAD_FLAG/, args.join(' '));
      assert.match(out.stderr, message, args.join(' '));
    }
    const down = await troupe(['status', '--head', 'http://127.0.0.1:1']);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /TROUPE_ERR_CONNECTION_CLOSED: cannot reach the head at http:\/\/127\.0\.0\.1:1/);
  });
});
