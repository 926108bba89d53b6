import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { nodeCall } from '../helpers/http.js';
import { StreamReader } from '../helpers/status-stream.js';

/**
 * The three places that say whether the head takes work: `/readyz` (for probes), the inference
 * protocol's `/v2/health/ready` (served on a connection a front-door worker holds, which relays
 * it to the head) and the status page's summary. Each is asked on a connection of its own, so a
 * `/v2` one goes to a worker, as a Triton client's would.
 */
async function askAll(cluster: TestCluster, stream: StreamReader) {
  const [oip, probe] = await Promise.all([nodeCall(cluster.url, 'GET', '/v2/health/ready'), nodeCall(cluster.url, 'GET', '/readyz')]);
  return { oip, probe, page: (await stream.next()).readiness };
}

for (const workers of ['2', '0']) {
  describe(`readiness: /v2/health/ready, /readyz and the status page agree (--http-workers ${workers})`, { timeout: 120_000 }, () => {
    let cluster: TestCluster;
    let stream: StreamReader;

    before(async () => {
      cluster = await startCluster({ agents: [], headArgs: ['--http-workers', workers] });
      stream = new StreamReader(cluster.url);
    });
    after(async () => {
      stream?.close();
      await cluster?.stop();
    });

    test('no node yet: all three say not ready, with the same reason in the same body', async () => {
      const { oip, probe, page } = await askAll(cluster, stream);
      const expected = { status: 'not ready', ready: false, nodes: 0, reason: 'no node is ALIVE (0 known)' };
      assert.equal(oip.status, 400, 'the protocol says not ready with a 4xx');
      assert.match(String(oip.headers['content-type']), /^application\/json/);
      assert.deepEqual(oip.json, expected, `body: ${oip.body.toString()}`);
      assert.equal(probe.status, 503);
      assert.deepEqual(probe.json, expected);
      assert.deepEqual(page, expected);
    });

    test('once a node joins: all three say ready', async () => {
      await cluster.startAgent(['--name', 'n1', '--cpus', '1']);
      await waitFor('/readyz to say ready', async () => (await nodeCall(cluster.url, 'GET', '/readyz')).status === 200);
      const page = await stream.until('the page to say ready', (s) => s.readiness.ready && s.readiness);
      assert.deepEqual(page, { status: 'ready', ready: true, nodes: 1 });
      const { oip, probe } = await askAll(cluster, stream);
      assert.equal(oip.status, 200);
      assert.equal(probe.status, 200);
      assert.deepEqual(probe.json, page);
      assert.deepEqual(oip.json, page, "the same body as /readyz (KServe's REST client reads its 'ready')");
    });

    test('the node stops: all three say not ready again, and why', async () => {
      const agent = cluster.agents[0]!;
      agent.process.kill('SIGTERM');
      await agent.exited;
      const page = await stream.until('the page to say not ready', (s) => !s.readiness.ready && s.readiness);
      const { oip, probe } = await askAll(cluster, stream);
      assert.equal(oip.status, 400);
      assert.equal(probe.status, 503);
      assert.deepEqual(oip.json, probe.json);
      assert.equal((probe.json as { reason: string }).reason, page.reason);
      assert.match(page.reason ?? '', /^no node is ALIVE \(\d known\)$/);
    });
  });
}
