import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, connect as tcpConnect } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { startHead } from '../../head/index.js';
import { connect, ensemble, model, pipeline, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { chromiumMissing, openChromium } from '../helpers/chromium.js';
import type { OpenChromium } from '../helpers/chromium.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { writeGraphModels } from '../helpers/graphs.js';
import { seededFloats } from '../helpers/tensors.js';

/** Debian's Chromium; `.ci/run` installs the package when it is missing. */
/**
 * Where the screenshot goes: a temporary folder (the suite writes nowhere else), or the path in
 * TROUPE_TEST_SCREENSHOT: `TROUPE_TEST_SCREENSHOT=$PWD/docs/status-page.png npm test` refreshes the
 * one docs/observability.md shows.
 */
const SCREENSHOT = process.env.TROUPE_TEST_SCREENSHOT ?? join(tmpdir(), `troupe-status-page-${process.pid}.png`);
const skip = chromiumMissing;

/**
 * Polls a JS expression in the page until it is truthy; bounded. (Not page.waitForFunction: that
 * evaluates strings with eval, which the page's Content-Security-Policy rightly refuses.)
 */
function inPage<T>(page: Page, what: string, expression: string, timeoutMs = 30_000): Promise<T> {
  return waitFor(`${what} (in the page)`, async () => ((await page.evaluate(expression)) as T) || undefined, timeoutMs, 100);
}

/** A TCP proxy between the browser and the head, so the test can cut the page's link as a network drop would. */
async function startProxy(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let down = false;
  const server = createServer((browser) => {
    if (down) return void browser.destroy();
    const head = tcpConnect(Number(port), hostname);
    const end = () => {
      for (const s of [browser, head]) {
        s.destroy();
        sockets.delete(s);
      }
    };
    for (const s of [browser, head]) {
      sockets.add(s);
      s.on('error', end).on('close', end);
    }
    browser.pipe(head).pipe(browser);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${address.port}/`,
    /** Drops every connection and refuses new ones. */
    cut() {
      down = true;
      dropAll();
    },
    restore() {
      down = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        dropAll();
      }),
  };
}

/** Coloured pixels in a chart's canvas: the axes and grid are grey, the lines are not. */
const colouredPixels = (chart: string) => `(() => {
  const canvas = document.querySelector('[data-chart="${chart}"] canvas');
  if (!canvas) return 0;
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 80) n++;
  return n;
})()`;

describe('the status page, in Chromium, against a real cluster', { timeout: 300_000, skip }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let browser: OpenChromium | undefined;
  let page: Page;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let traffic: Promise<void> | undefined;
  let stopTraffic = false;

  before(async () => {
    cluster = await startCluster({
      agents: [
        ['--name', 'gpu-node', '--simulate-gpus', '2', '--cpus', '8'],
        ['--name', 'cpu-node', '--cpus', '4'],
      ],
    });
    await writeGraphModels(cluster.modelDir);
    client = await connect(cluster.url);
    // pack: both halves share gpu 0, so the page shows a shared GPU and the encoder gets gpu 1 whole
    // (spread, the default, would give each half a GPU of its own).
    await client.deploy({
      name: 'mlp',
      model: 'mlp.onnx',
      replicas: 2,
      gpus: 0.5,
      placement: 'pack',
      threads: 1,
      batch: { maxSize: 8, maxDelayMs: 2 },
    });
    await client.deploy(
      pipeline('scorer', [
        model('encoder', { path: 'link21.onnx', gpus: 1, threads: 1 }),
        ensemble(
          'vote',
          [model('member-a', { path: 'member11.onnx', threads: 1 }), model('member-b', { path: 'member12.onnx', threads: 1 })],
          { combine: 'mean' },
        ),
      ]),
    );

    // Wants more GPUs than any node has: PENDING, and the page says why.
    await client.deploy({ name: 'big', model: 'mlp.onnx', gpus: 4, threads: 1 }, { wait: false });

    browser = await openChromium({ width: 1440, height: 900 });
    page = browser.page;
    page.setDefaultTimeout(30_000);
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    // A script error would leave the page blank and every wait below would time out; say why.
    page.on('close', () => errors.length && console.error(errors.join('\n')));
    proxy = await startProxy(cluster.url);
    await page.goto(proxy.url, { waitUntil: 'load', timeout: 30_000 });
  });

  after(async () => {
    stopTraffic = true;
    await traffic;
    await browser?.close();
    await proxy?.close();
    await client?.close();
    await cluster?.stop();
  });

  /** Calls both deployments in the background, a few at once so batches form, until told to stop. */
  function startTraffic(): void {
    const x = tensor('float32', [1, 64], seededFloats(64, 7));
    const loop = async (deployment: string) => {
      while (!stopTraffic) {
        await Promise.all(Array.from({ length: 6 }, () => client.run(deployment, { x }).catch(() => undefined)));
        await new Promise((r) => setTimeout(r, 15));
      }
    };
    traffic = Promise.all([loop('mlp'), loop('scorer')]).then(() => undefined);
  }

  test('shows the nodes, their simulated GPUs with the actors holding them, every actor and the graph', async () => {
    await page.locator('[data-node="gpu-node"][data-state="ALIVE"]').waitFor();
    await page.locator('[data-node="cpu-node"][data-state="ALIVE"]').waitFor();
    // The head's readiness, the answer /readyz and /v2/health/ready give (test/integration/readiness.test.ts).
    assert.equal(await page.locator('#readiness[data-ready="true"]').innerText(), 'ready');
    const gpus = page.locator('[data-node="gpu-node"] .gpu-card[data-simulated="true"]');
    assert.equal(await gpus.count(), 2);
    assert.match(await gpus.first().innerText(), /simulated/i);
    assert.equal(await page.locator('[data-node="cpu-node"] .gpu-card').count(), 0);
    // Both halves of the fractional mlp deployment share one GPU; the encoder holds the other whole.
    await page.locator('[data-node="gpu-node"] [data-holder="mlp#0"]').waitFor();
    await page.locator('[data-node="gpu-node"] [data-holder="encoder#0"]').waitFor();
    assert.match(await page.locator('[data-holder="mlp#0"]').innerText(), /×0\.5/);

    const actors = ['mlp#0', 'mlp#1', 'encoder#0', 'member-a#0', 'member-b#0'];
    for (const name of actors) await page.locator(`tr[data-actor="${name}"][data-state="READY"]`).waitFor();

    const pending = page.locator('tr[data-actor="big#0"][data-state="PENDING"]');
    await pending.waitFor();
    assert.match(await pending.locator('.reason').innerText(), /GPU/);

    const graph = page.locator('svg.dag[data-graph="scorer"]');
    await graph.waitFor();
    for (const step of ['encoder', 'member-a', 'member-b'])
      assert.equal(await graph.locator(`[data-step="${step}"]`).count(), 1, `step ${step} drawn once`);
    assert.ok((await graph.locator('path.dag-edge').count()) >= 6, 'arrows from the inputs through the steps to the outputs');
    assert.match(await graph.innerHTML(), /ensemble vote/);
    await page.locator('.event[data-kind="node-joined"]').first().waitFor();
  });

  test('draws the time series from live traffic', async () => {
    startTraffic();
    const rps = await inPage<number>(page, 'a requests/s line', `${colouredPixels('rps')} > 40 && ${colouredPixels('rps')}`);
    assert.ok(rps > 40, `the requests/s chart has ${rps} coloured pixels`);
    await inPage(page, 'a latency line', `${colouredPixels('latency')} > 40`);
    await inPage(page, 'a GPU utilisation line', `${colouredPixels('util')} > 40`);
    // The step boxes of the graph carry live rates.
    await inPage(
      page,
      'a req/s figure on the encoder step',
      `/[1-9][0-9.]* req\\/s/.test(document.querySelector('[data-step="encoder"]')?.textContent ?? '')`,
    );
  });

  test('a killed actor process changes state on the page without a reload', async () => {
    const before = (await client.describe()).deployments.find((d) => d.name === 'mlp')!.actors.find((a) => a.name === 'mlp#0')!;
    assert.ok(before.pid, 'mlp#0 has a pid');
    // Every state the row shows from now on, and a marker a reload would wipe.
    await page.evaluate(`(() => {
      window.__statusTest = { seen: [] };
      const look = () => {
        const s = document.querySelector('tr[data-actor="mlp#0"]')?.getAttribute('data-state');
        const seen = window.__statusTest.seen;
        if (s && seen[seen.length - 1] !== s) seen.push(s);
      };
      new MutationObserver(look).observe(document.getElementById('actors'), { subtree: true, childList: true, attributes: true });
      look();
    })()`);
    process.kill(before.pid, 'SIGKILL');

    const pid = await inPage<string>(
      page,
      'mlp#0 READY again with a new pid',
      `(() => { const r = document.querySelector('tr[data-actor="mlp#0"]'); return r && r.dataset.state === 'READY' && r.dataset.pid !== '${before.pid}' && r.dataset.pid; })()`,
      60_000,
    );
    assert.notEqual(Number(pid), before.pid);
    const seen = (await page.evaluate('window.__statusTest.seen')) as string[];
    assert.ok(
      seen.some((s) => s !== 'READY'),
      `the row went through a state other than READY: ${seen.join(' > ')}`,
    );
    const row = page.locator('tr[data-actor="mlp#0"]');
    assert.match(await row.locator('.last-error').innerText(), /SIGKILL|signal/i);
    assert.equal((await row.locator('td').nth(6).innerText()).trim(), '1', 'one restart');
    await page.locator('.event[data-kind="actor-crashed"]').first().waitFor();
    assert.match(await page.locator('.event[data-kind="actor-crashed"]').first().innerText(), /mlp#0/);
  });

  test('a banner shows while the connection is down, and the page reconnects by itself', async () => {
    proxy.cut();
    await page.locator('#banner').waitFor({ state: 'visible', timeout: 20_000 });
    assert.match(await page.locator('#banner').innerText(), /Disconnected from the head/);
    // Still down after a retry or two: the banner stays, and says it keeps trying.
    await inPage(page, 'a retry that failed', `/Reconnecting/.test(document.getElementById('banner').textContent)`);
    proxy.restore();
    await page.locator('#banner').waitFor({ state: 'hidden', timeout: 20_000 });
    await inPage(page, 'the link to be live again', `document.getElementById('link').dataset.state === 'live'`);
    assert.equal(await page.evaluate('typeof window.__statusTest'), 'object', 'the page was not reloaded');
  });

  test('a deployment split between versions: each version with its weight, model, replicas and share of calls; then promoted', async () => {
    const versions = (a: number) => [
      { version: 'v1', model: 'mlp.onnx', weight: a },
      { version: 'v2', model: 'mlp.onnx', weight: 100 - a },
    ];
    await client.deploy({ name: 'ab', cpus: 0.1, threads: 1, versions: versions(70) });
    const x = tensor('float32', [1, 64], seededFloats(64, 3));
    for (let i = 0; i < 10; i++) await client.run('ab', { x });
    const row = page.locator('tr[data-deployment="ab"]');
    await inPage(
      page,
      "ab's versions with their calls",
      `/v1 70% · mlp\\.onnx · 1\\/1 READY · 70% of calls/.test(document.querySelector('tr[data-deployment="ab"] [data-version="v1"]')?.textContent.replace(/\\s+/g, ' ') ?? '')`,
    );
    assert.match(
      (await row.locator('[data-version="v2"]').innerText()).replace(/\s+/g, ' '),
      /v2 30% · mlp\.onnx · 1\/1 READY · 30% of calls/,
    );
    await client.promote('ab', 'v2');
    await row.locator('[data-promoted]').waitFor();
    assert.match((await row.locator('[data-promoted]').innerText()).replace(/\s+/g, ' '), /promoted v2; rollback restores v1 70% · v2 30%/);
    await client.undeploy('ab');
  });

  test('takes a screenshot (docs/observability.md shows one)', async () => {
    // Let the charts fill with a few more seconds of traffic after the reconnect.
    await new Promise((r) => setTimeout(r, 6000));
    await inPage(page, 'the requests/s line', `${colouredPixels('rps')} > 40`);
    await mkdir(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true, timeout: 30_000 });
    assert.ok(existsSync(SCREENSHOT));
    if (process.env.TROUPE_TEST_SCREENSHOT === undefined) await rm(SCREENSHOT, { force: true });
  });
});

describe('the status page of a head beyond loopback, in Chromium', { timeout: 120_000, skip }, () => {
  const TOKEN = 'e2e-status-token-5d21';

  test('asks for the cluster token, keeps only an HttpOnly session, and shows the cluster once logged in', async () => {
    // Beyond loopback (all interfaces), so the token is required; the browser still goes through 127.0.0.1.
    const dataDir = await mkdtemp(join(tmpdir(), 'troupe-head-data-'));
    const head = await startHead({ host: '0.0.0.0', port: 0, token: TOKEN, dataDir });
    const browser = await openChromium();
    try {
      const { page } = browser;
      page.setDefaultTimeout(30_000);
      const url = `http://127.0.0.1:${new URL(head.url).port}/`;
      await page.goto(url, { waitUntil: 'load', timeout: 30_000 });
      await page.locator('#login').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#content').isHidden(), true);

      await page.locator('#login-token').fill('not-the-token');
      await page.locator('#login-form button').click();
      await page.locator('#login-error').waitFor({ state: 'visible' });
      assert.match(await page.locator('#login-error').innerText(), /not the cluster token/);

      await page.locator('#login-token').fill(TOKEN);
      await page.locator('#login-form button').click();
      await page.locator('#content').waitFor({ state: 'visible' });
      await inPage(page, 'the link to be live', `document.getElementById('link').dataset.state === 'live'`);
      assert.match(await page.locator('#nodes').innerText(), /No node has joined yet/);
      assert.equal(await page.locator('#login-token').inputValue(), '', 'the field lets go of the token');
      assert.equal(await page.evaluate('document.cookie'), '', 'the session cookie is HttpOnly');
      assert.ok(!(await page.content()).includes(TOKEN), 'the token is nowhere in the page');

      // The session outlives a reload.
      await page.reload({ waitUntil: 'load', timeout: 30_000 });
      await page.locator('#content').waitFor({ state: 'visible' });
      assert.equal(await page.locator('#login').isHidden(), true);
    } finally {
      await browser.close();
      await head.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
