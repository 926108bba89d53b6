import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { ClusterView } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { call } from '../helpers/http.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

/**
 * `troupe agent --advertise`: the address the head records for a node. On loopback the
 * connection's address is 127.0.0.1, so an advertised name is told apart; the multi-host test
 * checks the same between network namespaces.
 */
describe('agents advertise the address they are reachable at', { timeout: 120_000 }, () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({
      agents: [
        ['--name', 'advertised', '--advertise', 'gpu-7.cluster.internal'],
        ['--name', 'plain'],
      ],
    });
  });
  after(async () => {
    await cluster?.stop();
  });

  test('an advertised address wins; without one the head records where the agent connected from', async () => {
    const view = (await call(cluster.url, 'GET', '/api/v1/cluster')).json as ClusterView;
    const addresses = Object.fromEntries(view.nodes.map((n) => [n.name, n.address]));
    assert.deepEqual(addresses, { advertised: 'gpu-7.cluster.internal', plain: '127.0.0.1' });
  });

  test('an address with a scheme, a port or spaces is a bad flag', () => {
    for (const bad of ['http://gpu-7:8470', 'gpu 7', '']) {
      const out = spawnSync(process.execPath, [CLI, 'agent', '--head', 'ws://127.0.0.1:9', '--advertise', bad], {
        encoding: 'utf8',
        timeout: 20_000,
      });
      assert.equal(out.status, 2, `${bad}: ${out.stderr}`);
      assert.match(out.stderr, /TROUPE_ERR_BAD_FLAG: agent: --advertise: must be a host name or an IP address/, bad);
    }
  });
});
