import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster, ErrorCode } from '../../runtime/internal.js';
import { isAlive, startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { Prng } from '../helpers/fuzz.js';
import { call } from '../helpers/http.js';

const SEED = Number(process.env.TROUPE_TEST_FUZZ_SEED ?? 20240611);
const JSON_HEADERS = { 'content-type': 'application/json' };

interface Answer {
  status: number;
  code?: string;
  message: string;
}

/** Deploys `ref` as a fn over HTTP (the path a caller without the SDK takes). */
async function deployFn(url: string, name: string, ref: string): Promise<Answer> {
  const answer = await call(url, 'PUT', `/api/v1/deployments/${name}`, {
    body: JSON.stringify({ kind: 'fn', model: ref }),
    headers: JSON_HEADERS,
    timeoutMs: 30_000,
  });
  const json = (answer.json ?? {}) as { code?: string; error?: string };
  return { status: answer.status, ...(json.code ? { code: json.code } : {}), message: json.error ?? '' };
}

async function deploymentNames(url: string): Promise<string[]> {
  const answer = await call(url, 'GET', '/api/v1/deployments');
  return ((answer.json as { deployments: { name: string }[] }).deployments ?? []).map((d) => d.name).sort();
}

/**
 * The fn-path class of hostile input: references that try to run code the agent's operator did
 * not offer (installed packages, dot-folders, anything outside --module-dir, by `..`, absolute
 * paths, URL-encoding or symlinks made for the purpose). Each is refused with its code, the
 * refusal names no absolute path of the agent, no process exits, and nothing is deployed.
 */
describe('chaos: hostile fn references', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let scratch: string;
  let modules: string;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'troupe-fn-chaos-'));
    modules = join(scratch, 'modules');
    const ok = 'export const f = () => ({}); export const x = f;';
    for (const dir of ['steps', 'node_modules/x', '.git/hooks', '.troupe', 'a/.hidden'])
      await mkdir(join(modules, dir), { recursive: true });
    for (const file of ['steps/ok.js', 'node_modules/x.js', 'node_modules/x/index.js', '.git/hooks/x.js', '.troupe/x.js', 'a/.hidden/x.js'])
      await writeFile(join(modules, file), ok);
    await writeFile(join(scratch, 'outside.js'), ok);
    await symlink(join(scratch, 'outside.js'), join(modules, 'steps', 'escape.js'));
    await symlink(scratch, join(modules, 'steps', 'up'));
    await symlink(join(modules, 'node_modules', 'x', 'index.js'), join(modules, 'steps', 'pkg.js'));
    await symlink(join(modules, '.git'), join(modules, 'steps', 'git'));
    cluster = await startCluster({ agents: [['--name', 'n1', '--cpus', '64', '--module-dir', modules]] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  test('named hostile references: each refused with its code, none deployed, every process the same', async () => {
    const pids = { head: cluster.head.process.pid!, agent: cluster.agents[0]!.process.pid! };
    const before = await deploymentNames(cluster.url);
    const named: [string, ErrorCode, RegExp][] = [
      ['node_modules/x.js#f', 'TROUPE_ERR_MODEL_PATH', /is in 'node_modules'/],
      ['node_modules/x/index.js#f', 'TROUPE_ERR_MODEL_PATH', /is in 'node_modules'/],
      ['steps/../node_modules/x.js#f', 'TROUPE_ERR_MODEL_PATH', /is in 'node_modules'/],
      ['../../etc/passwd#f', 'TROUPE_ERR_MODEL_PATH', /is outside the agent's module directory/],
      ['../outside.js#f', 'TROUPE_ERR_MODEL_PATH', /is outside/],
      ['.git/hooks#x', 'TROUPE_ERR_MODEL_PATH', /is in '.git'/],
      ['.git/hooks/x.js#x', 'TROUPE_ERR_MODEL_PATH', /is in '.git'/],
      ['.troupe/x.js#f', 'TROUPE_ERR_MODEL_PATH', /is in '.troupe'/],
      ['a/.hidden/x.js#f', 'TROUPE_ERR_MODEL_PATH', /is in '.hidden'/],
      ['/etc/passwd#f', 'TROUPE_ERR_MODEL_PATH', /is an absolute path/],
      [`${join(scratch, 'outside.js')}#f`, 'TROUPE_ERR_MODEL_PATH', /is an absolute path/],
      [`${join(modules, 'node_modules', 'x.js')}#f`, 'TROUPE_ERR_MODEL_PATH', /is an absolute path/],
      ['steps/escape.js#f', 'TROUPE_ERR_MODEL_PATH', /links outside the agent's module directory/],
      ['steps/up/outside.js#f', 'TROUPE_ERR_MODEL_PATH', /links outside/],
      ['steps/pkg.js#f', 'TROUPE_ERR_MODEL_PATH', /links into node_modules\/ or a dot-folder/],
      ['steps/git/hooks/x.js#x', 'TROUPE_ERR_MODEL_PATH', /links into node_modules\/ or a dot-folder/],
      // URL-encoding is not decoded: these name files that do not exist.
      ['%2e%2e/outside.js#f', 'TROUPE_ERR_MODEL_PATH', /not found/],
      ['..%2Foutside.js#f', 'TROUPE_ERR_MODEL_PATH', /is in '..%2Foutside.js'/],
      ['steps/%2e%2e%2f%2e%2e%2fetc/passwd#f', 'TROUPE_ERR_MODEL_PATH', /not found/],
      ['steps#f', 'TROUPE_ERR_MODEL_PATH', /not found/],
      ['steps/ok.js#not-an-identifier', 'TROUPE_ERR_MODEL_PATH', /is not 'path\/to\/module.js#exportName'/],
      ['steps/ok.js', 'TROUPE_ERR_MODEL_PATH', /is not 'path\/to\/module.js#exportName'/],
    ];
    for (const [i, [ref, code, message]] of named.entries()) {
      const answer = await deployFn(cluster.url, `hostile-${i}`, ref);
      assert.equal(answer.code, code, `${ref}: ${answer.status} ${answer.message}`);
      assert.match(answer.message, message, ref);
      assert.ok(
        !answer.message.includes(modules) || ref.includes(modules),
        `${ref}: the answer names the module directory: ${answer.message}`,
      );
      assert.ok(!answer.message.includes(cluster.modelDir), `${ref}: the answer names the model directory: ${answer.message}`);
    }
    // The same through the SDK, which deploys a fn as a one-step graph.
    await assert.rejects(
      client.deploy({ name: 'sdk-hostile', kind: 'fn', model: 'node_modules/x.js#f' }),
      (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_MODEL_PATH',
    );
    assert.deepEqual(await deploymentNames(cluster.url), before, 'GET /api/v1/deployments is unchanged');
    assert.ok(isAlive(pids.head) && isAlive(pids.agent), 'head and agent are the same processes');
    // A reference the operator did offer still deploys and runs.
    assert.ok([200, 201].includes((await deployFn(cluster.url, 'fine', 'steps/ok.js#f')).status));
  });

  test('a bounded loop of generated hostile references: only refusals, nothing deployed, nothing crashed', async () => {
    const pids = { head: cluster.head.process.pid!, agent: cluster.agents[0]!.process.pid! };
    const before = await deploymentNames(cluster.url);
    const r = new Prng(SEED);
    const heads = [
      '..',
      '../..',
      '.',
      'node_modules',
      '.git',
      '.troupe',
      'steps/..',
      'steps/up',
      'steps/git',
      '%2e%2e',
      '/etc',
      scratch,
      `${modules}/node_modules`,
      'a/.hidden',
    ];
    const tails = ['x.js', 'outside.js', 'passwd', 'hooks/x.js', 'x/index.js', 'index.js', '..', '.'];
    const allowed = new Set(['TROUPE_ERR_MODEL_PATH', 'TROUPE_ERR_BAD_SPEC']);
    const deadline = Date.now() + 60_000;
    let sent = 0;
    for (let i = 0; i < 120 && Date.now() < deadline; i++) {
      const parts = Array.from({ length: 1 + r.int(3) }, () => r.pick(heads));
      const ref = `${parts.join('/')}/${r.pick(tails)}#${r.pick(['f', 'x', 'default', '__proto__'])}`;
      const answer = await deployFn(cluster.url, `gen-${i}`, ref);
      assert.ok(answer.code && allowed.has(answer.code), `${ref}: ${answer.status} ${answer.code} ${answer.message}`);
      assert.ok(
        !answer.message.includes(modules) || ref.includes(modules),
        `${ref}: the answer names the module directory: ${answer.message}`,
      );
      sent++;
    }
    assert.ok(sent >= 20, `only ${sent} references sent in time`);
    assert.deepEqual(await deploymentNames(cluster.url), before, 'GET /api/v1/deployments is unchanged');
    assert.ok(isAlive(pids.head) && isAlive(pids.agent), 'head and agent are the same processes');
  });
});

describe('an agent without --module-dir runs no fn steps', { timeout: 120_000 }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({ agents: [['--name', 'plain', '--cpus', '8']] });
  });
  after(() => cluster?.stop());

  test('a fn deploy is refused with TROUPE_ERR_NO_MODULE_DIR saying how to offer modules; models still deploy', async () => {
    for (const ref of ['steps/ok.js#f', 'node_modules/typescript/lib/typescript.js#createProgram', 'dist/cli/main.js#main']) {
      const answer = await deployFn(cluster.url, 'nodir', ref);
      assert.equal(answer.status, 400, answer.message);
      assert.equal(answer.code, 'TROUPE_ERR_NO_MODULE_DIR');
      assert.match(answer.message, /this agent has no module directory.*--module-dir DIR/);
    }
    assert.deepEqual(await deploymentNames(cluster.url), []);
    assert.equal(
      (
        await call(cluster.url, 'PUT', '/api/v1/deployments/mlp', {
          body: JSON.stringify({ model: 'mlp.onnx', threads: 1 }),
          headers: JSON_HEADERS,
        })
      ).status,
      201,
    );
  });
});
