import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Fleet } from '../../bench/scale/fleet.js';
import { DEFAULT_ACTOR_QUERY, DEFAULT_NODE_QUERY } from '../../head/status/client/protocol.js';
import type { ActorQuery, NodeQuery } from '../../head/status/client/protocol.js';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { StreamReader } from '../helpers/status-stream.js';

// The status stream's windows: 40 simulated nodes of 2 GPUs (bench/scale/, the real agent protocol
// over real sockets) and 3 deployments of 20 replicas, more than one page of either list.
const NODES = 40;
const nodes = (q: Partial<NodeQuery> = {}): NodeQuery => ({ ...DEFAULT_NODE_QUERY, ...q });
const actors = (q: Partial<ActorQuery> = {}): ActorQuery => ({ ...DEFAULT_ACTOR_QUERY, ...q });

describe('status stream: pages of nodes and actors, sorted, filtered and grouped as the page asks', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let fleet: Fleet;
  let client: Cluster;
  let stream: StreamReader;

  before(async () => {
    cluster = await startCluster({
      agents: [],
      headArgs: ['--http-workers', '0'],
      env: { TROUPE_LOG_LEVEL: process.env.TROUPE_TEST_LOG_LEVEL ?? 'error' },
    });
    fleet = await Fleet.start({ headUrl: cluster.url, nodes: NODES, gpusPerNode: 2, heartbeatMs: 500 });
    client = await connect(cluster.url);
    await Promise.all(['alpha', 'beta', 'gamma'].map((name) => client.deploy({ name, model: 'sim.onnx', replicas: 20, gpus: 1, cpus: 1 })));
    stream = new StreamReader(cluster.url);
  });
  after(async () => {
    stream?.close();
    await client?.close();
    await cluster?.stop();
    fleet?.close();
  });

  test('the first update: the whole summary, every deployment, and the first page of each list', async () => {
    const first = await stream.next();
    assert.equal(first.full, true);
    assert.deepEqual(first.summary.nodes, { total: NODES, ALIVE: NODES, SUSPECT: 0, DEAD: 0 });
    assert.equal(first.summary.actors.total, 60);
    assert.equal(first.summary.actors.READY, 60);
    assert.deepEqual(first.summary.gpus, { total: 2 * NODES, simulated: 2 * NODES, allocated: 60 });
    assert.deepEqual(
      first.deployments.map((d) => [d.name, d.states]),
      [
        ['alpha', { READY: 20 }],
        ['beta', { READY: 20 }],
        ['gamma', { READY: 20 }],
      ],
    );
    assert.equal(first.nodes.length, 24, 'the default page of nodes');
    assert.equal(first.nodesTotal, NODES);
    assert.equal(first.actors.length, 50, 'the default page of actors');
    assert.equal(first.actorsTotal, 60);
    assert.deepEqual(
      first.actors.slice(0, 3).map((a) => a.name),
      ['alpha#0', 'alpha#1', 'alpha#2'],
      'by deployment, then by name as people count',
    );
    // 3 deployments: few enough for a line each; 80 GPUs: too many, so one line for all of them.
    const charted = await stream.until('the first sample with the deployments', (s) => 'rps|alpha' in s.series.values && s.series.values);
    assert.ok(!('rps|*' in charted));
    assert.ok('util|*' in charted && !('util|sim-00/gpu0' in charted), Object.keys(charted).join(', '));
  });

  test('a view: the next page, a search, a state and a node; later updates send only changed rows', async () => {
    const seq = await stream.view(nodes({ offset: 24 }), actors({ offset: 50 }));
    const page2 = await stream.until('the second pages', (s) => s.actorsViewSeq === seq && s);
    assert.equal(page2.update.actors.full, true);
    assert.equal(page2.nodes.length, NODES - 24);
    assert.deepEqual(
      page2.actors.map((a) => a.name),
      Array.from({ length: 10 }, (_, i) => `gamma#${10 + i}`),
    );

    const node = 'sim-17';
    const holding = [...fleet.nodes.find((n) => n.name === node)!.actors.keys()].length;
    const search = await stream.view(nodes({ text: 'm-17' }), actors({ node, sort: 'name' }));
    const found = await stream.until('the search', (s) => s.actorsViewSeq === search && s);
    assert.deepEqual(
      found.nodes.map((n) => n.name),
      [node],
    );
    assert.equal(found.nodes[0]!.actors, holding);
    assert.equal(found.actorsTotal, holding);
    assert.ok(found.actors.every((a) => a.node === node));

    const byText = await stream.view(nodes(), actors({ text: 'beta#1' }));
    const texts = await stream.until('the text search', (s) => s.actorsViewSeq === byText && s);
    assert.deepEqual(texts.actors.map((a) => a.name).sort(), [
      'beta#1',
      'beta#10',
      'beta#11',
      'beta#12',
      'beta#13',
      'beta#14',
      'beta#15',
      'beta#16',
      'beta#17',
      'beta#18',
      'beta#19',
    ]);
    const quiet = await stream.next();
    assert.equal(quiet.update.actors.full, false);
    assert.equal(quiet.update.actors.ids, undefined, 'the same rows in the same order: no order sent again');
    assert.ok(quiet.update.actors.rows.length < texts.actors.length, 'rows that did not change are not sent again');
  });

  test('grouped by deployment: the groups of the page, each with its count in the whole cluster', async () => {
    const seq = await stream.view(nodes(), actors({ group: 'deployment', sort: 'name', descending: true, offset: 10, limit: 20 }));
    const grouped = await stream.until('the grouped page', (s) => s.actorsViewSeq === seq && s);
    assert.deepEqual(grouped.update.actors.groups, [
      { key: 'alpha', count: 20 },
      { key: 'beta', count: 20 },
    ]);
    assert.equal(grouped.actors[0]!.name, 'alpha#9', 'groups in order, names descending inside each');
    assert.equal(grouped.actors[10]!.name, 'beta#19');
  });

  test('a view is checked: a bad field or an unknown viewer is refused, naming why', async () => {
    const post = (body: unknown) =>
      fetch(`${cluster.url}/api/v1/stream/view`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const viewer = stream.viewer!;
    const tooMany = await post({ viewer, seq: 100, nodes: nodes({ limit: 5000 }), actors: actors() });
    assert.equal(tooMany.status, 400);
    const body = (await tooMany.json()) as { code: string; error: string };
    assert.equal(body.code, 'TROUPE_ERR_BAD_REQUEST');
    assert.match(body.error, /nodes\.limit/);
    const unknown = await post({ viewer: 'no-such-viewer', seq: 1, nodes: nodes(), actors: actors() });
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { code: string }).code, 'TROUPE_ERR_NOT_FOUND');
    const bad = await post({ viewer: 'x', seq: 1, nodes: nodes({ sort: 'nope' as NodeQuery['sort'] }), actors: actors() });
    assert.equal(bad.status, 400);
  });

  test('a page that stops reading is not dropped: what it missed comes folded into its next updates', async (t) => {
    const slow = new StreamReader(cluster.url);
    await slow.next();
    // Whole windows of every node and actor, asked for again and again while the page reads
    // nothing: 400 of them would be 25 megabytes. The head folds them: views that come together
    // share one update, and a page whose connection is full gets none until it drains.
    const VIEWS = 400;
    let last = 0;
    for (let i = 0; i < VIEWS; i++) last = await slow.view(nodes({ limit: 200, offset: i % 2 }), actors({ limit: 200, offset: i % 2 }));
    const caughtUp = await slow.until('the last view', (s) => s.actorsViewSeq === last && s, 60_000);
    assert.equal(caughtUp.nodes.length, NODES - 1);
    assert.equal(caughtUp.actors.length, 59);
    t.diagnostic(`${slow.updates} updates, ${slow.bytes} bytes, for ${VIEWS} views`);
    assert.ok(
      slow.updates < VIEWS,
      `${slow.updates} updates (${slow.bytes} bytes) for ${VIEWS} views: the ones the page could not take were folded, not queued`,
    );
    // Still live: the next update comes on the same connection.
    await slow.next();
    slow.close();
  });
});
