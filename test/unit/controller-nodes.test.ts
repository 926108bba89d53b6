import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TroupeError } from '../../runtime/errors.js';
import { FakeAgent } from '../helpers/fake-agent.js';
import { cluster } from '../helpers/controller-harness.js';

describe('Controller: nodes', { timeout: 10_000 }, () => {
  test("a lost node's actors are terminated and restarted elsewhere after the back-off", async () => {
    const c = cluster();
    const a = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a: actor, link } = await c.startAndReady(a.agent);
    const b = c.join('b');
    c.controller.nodes.nodeDead(a.node, 10_000);
    assert.equal(a.node.state, 'DEAD');
    assert.equal(a.agent.closed, true, "the dead node's connection is dropped");
    assert.equal(link.terminatedBecause, 'node a was lost');
    assert.deepEqual([actor.state, actor.restarts], ['RESTARTING', 1], 'a lost node counts as a crash');
    c.clock.advance(100);
    assert.equal(b.agent.starts.length, 1);
    assert.equal(actor.nodeId, b.node.id);
    assert.equal(
      c.state.events.recent(10).some((e) => e.message === 'a DEAD after 10000 ms without a heartbeat'),
      true,
    );
  });

  test('a node that leaves on purpose costs its actors no restart: they are placed elsewhere at once', async () => {
    const c = cluster();
    const a = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a: actor, link } = await c.startAndReady(a.agent);
    const b = c.join('b');
    c.controller.nodes.agentDisconnected(a.node, a.agent, true);
    assert.equal(link.terminatedBecause, undefined, 'a leaving node drains its actors itself');
    assert.deepEqual([actor.state, actor.restarts, actor.nodeId], ['STARTING', 0, b.node.id]);
    assert.equal(b.agent.starts.length, 1);
  });

  test('a closed connection makes a node SUSPECT (no new actors); a heartbeat brings it back and places what waited', async () => {
    const c = cluster();
    const a = c.join('a');
    c.controller.nodes.agentDisconnected(a.node, a.agent, false);
    assert.equal(a.node.state, 'SUSPECT');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    assert.match(c.actorsOf('mlp')[0]!.reason!, /no node is alive/);
    // The agent comes back on a new connection.
    const again = new FakeAgent();
    c.controller.nodes.agentRegistered({ name: 'a', address: '127.0.0.1', resources: a.node.resources }, [], again);
    c.controller.schedule();
    assert.equal(a.node.state, 'ALIVE');
    assert.equal(again.starts.length, 1);
    c.controller.close();
  });

  test('a SUSPECT node that heartbeats again takes the actors that waited', () => {
    const c = cluster();
    const a = c.join('a');
    c.controller.nodes.nodeSuspect(a.node, 3000);
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    assert.equal(a.agent.starts.length, 0);
    c.controller.nodes.nodeHeartbeat(a.node, { type: 'heartbeat' });
    assert.equal(a.node.state, 'ALIVE');
    assert.equal(a.node.lastSeen, c.clock.now());
    assert.equal(a.agent.starts.length, 1);
    c.controller.close();
  });

  test('a second agent under a live node name is refused; the first keeps the node', () => {
    const c = cluster();
    const a = c.join('a');
    assert.throws(
      () => c.controller.nodes.agentRegistered({ name: 'a', address: '10.0.0.9', resources: a.node.resources }, [], new FakeAgent()),
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_NODE_NAME_TAKEN',
    );
    assert.equal(a.node.agent, a.agent);
    assert.equal(a.agent.closed, false);
  });

  test('a re-registering agent: listed actors are kept, unknown ones stopped, missing ones crashed', async () => {
    const c = cluster();
    const a = c.join('a');
    void c.controller.deploy(c.spec('mlp', 2)).catch(() => {});
    const kept = await c.startAndReady(a.agent, 11);
    const gone = await c.startAndReady(a.agent, 12);
    // Its connection drops, and it is back before liveness gives up on it.
    c.controller.nodes.agentDisconnected(a.node, a.agent, false);
    const again = new FakeAgent();
    c.controller.nodes.agentRegistered(
      { name: 'a', address: '127.0.0.1', resources: a.node.resources },
      [
        { actorId: kept.a.id, pid: 11 },
        { actorId: 'stranger', pid: 99 },
      ],
      again,
    );
    assert.equal(kept.a.state, 'READY');
    assert.equal(gone.a.state, 'RESTARTING');
    assert.match(gone.a.reason!, /its process was gone when node a reconnected/);
    assert.deepEqual(again.stops, [{ actorId: 'stranger', graceMs: 5000 }]);
    c.controller.close();
  });
});
