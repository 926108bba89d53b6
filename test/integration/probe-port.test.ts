import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { connect as netConnect, createServer } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startChild, stopChild } from '../../cli/children.js';
import { startHead } from '../../head/server.js';
import type { Child } from '../../cli/children.js';
import { waitFor } from '../helpers/cluster.js';
import { childEnv } from '../helpers/env.js';
import { freePort } from '../helpers/free-port.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));
const env = childEnv();

/** `troupe head --probe-port`: /healthz and /readyz on a listener of their own, as the main port answers them. */
describe('the probe port', { timeout: 120_000 }, () => {
  let root: string;
  let head: Child;
  let agent: Child | undefined;
  let url: string;
  let probes: string;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'troupe-probes-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    head = startChild(
      ['head', '--port', String(port), '--no-grpc', '--probe-port', '0', '--data-dir', join(root, 'head'), '--http-workers', '1'],
      /probes \(\/healthz, \/readyz\) on (\S+)/,
      20_000,
      env,
    );
    probes = await head.line;
  });
  after(async () => {
    if (agent) await stopChild(agent, 10_000);
    await stopChild(head, 10_000);
    await rm(root, { recursive: true, force: true });
  });

  test('it answers liveness, and readiness as the main port does: not ready with no node, ready once one joins', async () => {
    assert.match(probes, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(new URL(probes).port, new URL(url).port);
    const live = await fetch(`${probes}/healthz`);
    assert.equal(live.status, 200);
    assert.deepEqual(await live.json(), { status: 'ok' });
    const notReady = await fetch(`${probes}/readyz`);
    assert.equal(notReady.status, 503);
    const body = (await notReady.json()) as Record<string, unknown>;
    assert.deepEqual(body, await (await fetch(`${url}/readyz`)).json(), 'the same answer as the main port');
    assert.equal(body.ready, false);
    assert.match(String(body.reason), /no node is ALIVE/);

    agent = startChild(['agent', '--head', url, '--model-dir', root, '--state-dir', join(root, 'agent')], /joined/, 20_000, env);
    await agent.line;
    const ready = await waitFor('/readyz on the probe port to say ready', async () => {
      const res = await fetch(`${probes}/readyz`);
      return res.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
    });
    assert.deepEqual(ready, { status: 'ready', ready: true, nodes: 1 });
    const head = await fetch(`${probes}/healthz`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
  });

  test('anything else is refused with a code that names it, and nothing of the API is reachable there', async () => {
    const other = await fetch(`${probes}/api/v1/deployments`);
    assert.equal(other.status, 404);
    const refused = (await other.json()) as { code: string; error: string };
    assert.equal(refused.code, 'TROUPE_ERR_NOT_FOUND');
    assert.match(refused.error, /serves \/healthz and \/readyz only, not '\/api\/v1\/deployments'/);
    const posted = await fetch(`${probes}/healthz`, { method: 'POST', body: 'x' });
    assert.equal(posted.status, 405);
    assert.equal(((await posted.json()) as { code: string }).code, 'TROUPE_ERR_BAD_REQUEST');
    // The main port still answers the API.
    assert.equal((await fetch(`${url}/api/v1/deployments`)).status, 200);
  });

  test('a bad or taken --probe-port is refused with TROUPE_ERR_BAD_FLAG naming it, and no head starts', () => {
    const bad = spawnSync(process.execPath, [CLI, 'head', '--port', '0', '--probe-port', '70000', '--data-dir', join(root, 'bad')], {
      encoding: 'utf8',
      timeout: 20_000,
      env,
    });
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /TROUPE_ERR_BAD_FLAG/);
    assert.match(bad.stderr, /--probe-port/);
    const taken = spawnSync(
      process.execPath,
      [CLI, 'head', '--port', '0', '--no-grpc', '--probe-port', new URL(probes).port, '--data-dir', join(root, 'taken')],
      { encoding: 'utf8', timeout: 20_000, env },
    );
    assert.equal(taken.status, 2, taken.stderr);
    assert.match(taken.stderr, /TROUPE_ERR_BAD_FLAG/);
    assert.match(taken.stderr, /--probe-port \d+: .*EADDRINUSE.*give another, or 0 for any/);
  });

  test('an embedded head refused for a taken --probe-port leaves its main port free: its accept thread stopped with it', async () => {
    const port = await freePort();
    await assert.rejects(
      startHead({ port, probePort: Number(new URL(probes).port), httpWorkers: 1, dataDir: join(root, 'embedded') }),
      (err: Error & { code?: string }) => err.code === 'TROUPE_ERR_BAD_FLAG' && /--probe-port/.test(err.message),
    );
    // Nothing accepts there any more, and the port can be listened on again.
    const refused = await new Promise<boolean>((resolve) => {
      const socket = netConnect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(false))).once('error', () => resolve(true));
    });
    assert.ok(refused, 'a connection to the refused head main port was accepted');
    const again = createServer();
    await new Promise<void>((resolve, reject) => again.once('error', reject).listen(port, '127.0.0.1', resolve));
    again.close();
  });
});
