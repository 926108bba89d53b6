import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { Fleet } from '../../bench/scale/fleet.js';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { chromiumMissing, openChromium } from '../helpers/chromium.js';
import type { OpenChromium } from '../helpers/chromium.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';

// The status page at cluster scale (issue 27): a real head, 1,000 simulated nodes of 4 GPUs that
// speak the agent protocol over real sockets (bench/scale/), 2,000 actors through the SDK, and the
// page in Chromium. Correctness, not speed: it paints, the counts are the cluster's, search finds
// one node and one actor among thousands, the lists page, and a node's death shows.
const NODES = 1000;
const GPUS = 4;
const DEPLOYMENTS = 20;
const REPLICAS = 100;
const TOTAL = DEPLOYMENTS * REPLICAS;

const skip = chromiumMissing;

/** Text of an element, polled until `check` accepts it; bounded. */
function textOf(page: Page, selector: string, what: string, check: (text: string) => boolean, timeoutMs = 30_000): Promise<string> {
  return waitFor(
    `${what} (in the page)`,
    async () => {
      const text = await page
        .locator(selector)
        .first()
        .innerText({ timeout: 1000 })
        .catch(() => '');
      return check(text) ? text : undefined;
    },
    timeoutMs,
    100,
  );
}

describe(`the status page in Chromium at ${NODES.toLocaleString('en-US')} simulated nodes`, { timeout: 300_000, skip }, () => {
  let cluster: TestCluster;
  let fleet: Fleet;
  let client: Cluster;
  let browser: OpenChromium | undefined;
  let page: Page;

  before(async () => {
    cluster = await startCluster({
      agents: [],
      // The node killed below is found dead in 4 s, not 10; heartbeats every 250 ms keep a loaded
      // machine's late ones from making live nodes SUSPECT (the counts below are exact).
      headArgs: ['--http-workers', '0', '--suspect-after-ms', '2000', '--dead-after-ms', '4000'],
      env: { TROUPE_LOG_LEVEL: process.env.TROUPE_TEST_LOG_LEVEL ?? 'error' },
    });
    fleet = await Fleet.start({ headUrl: cluster.url, nodes: NODES, gpusPerNode: GPUS, heartbeatMs: 250 });
    client = await connect(cluster.url);
    const names = Array.from({ length: DEPLOYMENTS }, (_, i) => `team-${i}`);
    await Promise.all(names.map((name) => client.deploy({ name, model: 'sim.onnx', replicas: REPLICAS, gpus: 1, cpus: 1 })));
    browser = await openChromium({ width: 1440, height: 900 });
    page = browser.page;
    page.setDefaultTimeout(30_000);
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('close', () => errors.length && console.error(errors.join('\n')));
  });

  after(async () => {
    await browser?.close();
    await client?.close();
    await cluster?.stop();
    fleet?.close();
  });

  test('paints the summary and the first page of nodes and actors, with the cluster’s counts', async (t) => {
    const start = Date.now();
    await page.goto(cluster.url, { waitUntil: 'commit', timeout: 30_000 });
    await page.locator('[data-node]').first().waitFor();
    await page.locator('tr[data-actor]').first().waitFor();
    t.diagnostic(`first paint of nodes and actors ${Date.now() - start} ms after the navigation began`);
    await textOf(page, '#nodes-alive', 'every node alive', (s) => s === '1,000/1,000 nodes alive');
    await textOf(page, '#actors-ready', 'every actor ready', (s) => s === '2,000/2,000 actors ready');
    assert.equal(await page.locator('[data-node]').count(), 24, 'one page of node cards');
    assert.equal(await page.locator('tr[data-actor]').count(), 50, 'one page of actors');
    assert.match(await page.locator('#nodes-pager .pager-text').innerText(), /^1–24 of 1,000 nodes$/);
    assert.match(await page.locator('#actors-pager .pager-text').innerText(), /^1–50 of 2,000 actors$/);
    // Grouped by state: one heading, with every node in it.
    assert.match(await page.locator('[data-node-group="ALIVE"]').innerText(), /1,000 nodes/);
    // 20 deployments: a row each in the table, and the charts draw the cluster's aggregate.
    assert.equal(await page.locator('#deployments tr[data-deployment]').count(), DEPLOYMENTS);
    await textOf(page, '[data-chart="rps"] .u-legend', 'the aggregate requests/s line', (s) => s.includes('all deployments'));
    assert.equal(await page.locator('[data-chart="rps"] figcaption .section-note').innerText(), 'the whole cluster');
  });

  test('search finds one node and one actor among thousands', async () => {
    await page.locator('#nodes-filter').fill('sim-421');
    await textOf(page, '#nodes-pager .pager-text', 'one node found', (s) => s === '1–1 of 1 nodes');
    assert.deepEqual(await page.locator('[data-node]').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-node'))), ['sim-421']);
    const held = fleet.nodes.find((n) => n.name === 'sim-421')!.actors.size;
    assert.match(await page.locator('[data-node="sim-421"] [data-node-actors]').innerText(), new RegExp(`^${held} actors?$`));

    await page.locator('#actors-filter').fill('team-7#42');
    await textOf(page, '#actors-pager .pager-text', 'one actor found', (s) => s === '1–1 of 1 actors');
    const row = page.locator('tr[data-actor]');
    assert.equal(await row.count(), 1);
    assert.equal(await row.getAttribute('data-actor'), 'team-7#42');
    assert.equal(await row.getAttribute('data-state'), 'READY');
    await page.locator('#actors-filter').fill('');
    await page.locator('#nodes-filter').fill('');
    await textOf(page, '#nodes-pager .pager-text', 'every node listed again', (s) => s === '1–24 of 1,000 nodes');
  });

  test('the lists page, and a node’s actors are one click away', async () => {
    await textOf(page, '#actors-pager .pager-text', 'the first page of actors', (s) => s === '1–50 of 2,000 actors');
    const first = await page.locator('tr[data-actor]').first().getAttribute('data-actor');
    await page.locator('#actors-pager button[aria-label="next page"]').click();
    await textOf(page, '#actors-pager .pager-text', 'the second page', (s) => s === '51–100 of 2,000 actors');
    await waitFor(
      'the second page of rows',
      async () => (await page.locator('tr[data-actor]').first().getAttribute('data-actor')) !== first,
    );
    assert.equal(
      await page.locator('tr[data-actor]').first().getAttribute('data-actor'),
      'team-0#50',
      'by deployment, then as people count',
    );

    await page.locator('#nodes-pager button[aria-label="next page"]').click();
    await textOf(page, '#nodes-pager .pager-text', 'the second page of nodes', (s) => s === '25–48 of 1,000 nodes');
    const node = (await page.locator('[data-node]').first().getAttribute('data-node'))!;
    assert.equal(node, 'sim-024');
    await page.locator(`[data-node="${node}"] [data-node-actors]`).click();
    const held = fleet.nodes.find((n) => n.name === node)!.actors.size;
    await textOf(page, '#actors-pager .pager-text', `the actors of ${node}`, (s) => s === `1–${held} of ${held} actors`);
    const nodes = await page.locator('tr[data-actor] td:nth-child(4)').evaluateAll((cells) => cells.map((c) => c.textContent?.trim()));
    assert.deepEqual(new Set(nodes), new Set([node]));
    await page.locator('[data-clear="node"]').click();
    await textOf(page, '#actors-pager .pager-text', 'every actor again', (s) => s === '1–50 of 2,000 actors');
  });

  test('a node that dies shows in the counts, and its actors come back elsewhere', async () => {
    const victim = fleet.nodes.find((n) => n.actors.size > 0 && n.name !== 'sim-421')!;
    victim.kill();
    await page.locator('#nodes-state').selectOption('DEAD');
    await page.locator(`[data-node="${victim.name}"][data-state="DEAD"]`).waitFor({ timeout: 60_000 });
    assert.match(await page.locator('[data-node-group="DEAD"]').innerText(), /DEAD\s+1 node$/);
    await textOf(page, '#nodes-pager .pager-text', 'the one dead node', (s) => s === '1–1 of 1 nodes');
    await textOf(page, '#nodes-alive', 'one node fewer alive', (s) => s === '999/1,000 nodes alive', 60_000);
    const total = TOTAL.toLocaleString('en-US');
    await textOf(page, '#actors-ready', 'every actor ready again', (s) => s === `${total}/${total} actors ready`, 60_000);
  });
});
