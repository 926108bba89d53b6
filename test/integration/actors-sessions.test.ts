import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { ActorHandle, Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT, rejectsWith } from '../helpers/graphs.js';

const CLASSES = 'test/fixtures/classes.js';

describe('class actors with replicas: sticky sessions and balancing', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let notebook: ActorHandle;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT] });
    client = await connect(cluster.url);
    notebook = await client.actor({ name: 'notes', module: CLASSES, export: 'Notebook', replicas: 2, cpus: 0.1 });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test('calls with the same sessionKey go to the same instance, and its state is theirs', async () => {
    const pids = new Set<number>();
    for (let s = 0; s < 6; s++) {
      const session = notebook.session(`user-${s}`);
      const first = await session.call<number>('pid');
      for (let i = 0; i < 3; i++) assert.equal(await session.call('pid'), first, `session user-${s} moved`);
      pids.add(first);
    }
    // Sessions are bound when they start, to the least busy instance: here both take some.
    assert.equal(pids.size, 2);
    const alice = notebook.session('alice');
    await alice.call('write', 'alice 1');
    await alice.call('write', 'alice 2');
    assert.deepEqual(
      (await alice.call<string[]>('read')).filter((n) => n.startsWith('alice')),
      ['alice 1', 'alice 2'],
    );
  });

  test('calls without a session go to the least busy instance', async () => {
    const pids = await Promise.all(Array.from({ length: 8 }, () => notebook.call<number>('pid')));
    assert.equal(new Set(pids).size, 2);
  });

  test("a session's calls wait while its instance restarts; one that lost its state says so once, then continues on the restarted one", async () => {
    const bob = notebook.session('bob');
    const before = await bob.call<number>('pid');
    await rejectsWith(bob.call('crash'), 'TROUPE_ERR_ACTOR_DIED', /before answering/);
    // Sent at once: it waits in the head for the same instance, not for whichever is READY; that
    // instance came back from its constructor (Notebook has no checkpoint()), so bob is told.
    await rejectsWith(
      bob.withOptions({ timeoutMs: 30_000 }).call('read'),
      'TROUPE_ERR_STATE_LOST',
      /session 'bob' of actor 'notes': instance notes#\d restarted \(exited with code \d+.*\) with no checkpoint to restore .*the state it held for this session is lost/,
    );
    const after = await bob.call<number>('pid');
    assert.notEqual(after, before);
    const view = await waitFor('the restarted instance', async () =>
      (await client.describe()).deployments.find((d) => d.name === 'notes')!.actors.find((a) => a.pid === after),
    );
    assert.equal(view.restarts, 1);
  });
});
