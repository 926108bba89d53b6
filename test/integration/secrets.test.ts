import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { writeExampleModels } from '../../models/index.js';
import { WebSocket } from 'ws';
import { connect, decodeFrame, encodeFrame, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const TOKEN = 'sekrit-cluster-token-5f3a9c';

interface Proc {
  child: ChildProcess;
  /** Everything it wrote, stdout and stderr. */
  output: () => string;
  exited: Promise<void>;
}

/** A troupe process with its output captured (the test helpers let stderr through instead). */
function troupe(args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env });
  let text = '';
  child.stdout!.on('data', (c: Buffer) => (text += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (text += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, output: () => text, exited };
}

/** The direct-call token of `deployment`'s first replica, as the head tells an admitted client. */
async function directTokenOf(url: string, deployment: string): Promise<string> {
  const ws = new WebSocket(new URL('/v1/client', url.replace('http', 'ws')), { headers: { authorization: `Bearer ${TOKEN}` } });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const answer = new Promise<unknown>((resolve) => ws.once('message', (data: Buffer) => resolve(decodeFrame(data)[0])));
  ws.send(encodeFrame([{ type: 'routes', id: 'r1', deployment }]));
  const reply = (await answer) as { value: { replicas: { token: string }[] } };
  ws.close();
  const token = reply.value.replicas[0]?.token;
  assert.ok(token && token.length >= 16, 'the replica takes direct calls');
  return token;
}

async function stop(p: Proc | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
  await p.exited;
  clearTimeout(timer);
}

/**
 * The cluster token and the actors' secrets never leave the places they must be: not in any log
 * line (at debug level, through failed logins and bad tokens), not on the status page, the cluster
 * view or /metrics, not in the head's state file, not in an actor's environment.
 */
describe('secrets stay secret', { timeout: 120_000 }, () => {
  let dir: string;
  let head: Proc;
  let agent: Proc;
  let client: Cluster;
  let url: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-secrets-'));
    await writeExampleModels(join(dir, 'models'));
    const env = childEnv({ TROUPE_TOKEN: TOKEN }, 'debug');
    head = troupe(['head', '--port', '0', '--data-dir', join(dir, 'head')], env);
    url = await waitFor('the head to listen', () => /listening on (\S+)/.exec(head.output())?.[1], 20_000);
    agent = troupe(
      ['agent', '--head', url, '--name', 'n1', '--cpus', '2', '--model-dir', join(dir, 'models'), '--state-dir', join(dir, 'agent')],
      env,
    );
    await waitFor('the agent to join', () => /joined/.test(agent.output()), 20_000);
    client = await connect(url, { token: TOKEN });
  });
  after(async () => {
    await client?.close();
    await stop(agent);
    await stop(head);
    await rm(dir, { recursive: true, force: true });
  });

  test('through deploys, runs, refused logins and every read endpoint, no token or secret is written anywhere', async () => {
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    await client.run('mlp', { x: tensor('float32', [1, 64], new Float32Array(64)) });
    // Refused: a wrong token on the WebSocket, a wrong one and a right one over HTTP.
    await assert.rejects(connect(url, { token: 'wrong-token-wrong-token', reconnect: false }));
    await fetch(`${url}/api/v1/deployments/x`, { method: 'PUT', headers: { authorization: 'Bearer wrong-token-wrong' }, body: '{}' });
    await fetch(`${url}/api/v1/deployments/x`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: '{"model": "nope.onnx", "bogus": 1}',
    });
    const pages = await Promise.all(
      ['/', '/api/v1/cluster', '/metrics', '/api/v1/deployments', '/docs', '/v2'].map(async (path) =>
        (await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text(),
      ),
    );
    const state = await waitFor('the state file to hold the actor', async () => {
      const text = await readFile(join(dir, 'head', 'state.json'), 'utf8').catch(() => '');
      return text.includes(view.actors[0]!.id) ? text : undefined;
    });
    const secret = (JSON.parse(state) as { actors: { secret: string }[] }).actors[0]!.secret;
    // The token a replica's direct endpoint wants, which the head hands only to admitted clients.
    const directToken = await directTokenOf(url, 'mlp');
    const environ = await readFile(`/proc/${view.actors[0]!.pid}/environ`, 'latin1');

    await stop(agent);
    await stop(head);
    const logs = head.output() + agent.output();
    assert.ok(logs.length > 1000, 'debug logs were written');
    assert.ok(!logs.includes(TOKEN), 'the token is in a log line');
    assert.ok(!logs.includes(secret), "an actor's secret is in a log line");
    assert.ok(!logs.includes(directToken), "a replica's direct-call token is in a log line");
    pages.forEach((page, i) => {
      assert.ok(!page.includes(TOKEN), `the token is on page ${i}`);
      assert.ok(!page.includes(secret), `an actor's secret is on page ${i}`);
      assert.ok(!page.includes(directToken), `a replica's direct-call token is on page ${i}`);
    });
    assert.ok(!state.includes(TOKEN), 'the token is in the state file');
    assert.ok(!state.includes(directToken), "a replica's direct-call token is in the state file");
    assert.ok(!environ.includes(TOKEN), "the token is in an actor's environment");
  });
});
