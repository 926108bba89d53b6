import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TroupeError } from '../../runtime/errors.js';
import { FakeActorLink } from '../helpers/fake-agent.js';
import { META, cluster, exit, flush, input, track } from '../helpers/controller-harness.js';

describe('Controller: deploy', { timeout: 10_000 }, () => {
  test('places replicas on nodes and resolves when every one is READY', async () => {
    const c = cluster();
    const [a, b] = [c.join('a'), c.join('b')];
    const deploy = track(c.controller.deploy(c.spec('mlp', 2)));
    assert.deepEqual([a.agent.starts.length, b.agent.starts.length], [1, 1], 'spread: one replica per node');
    const order = a.agent.starts[0]!.order;
    // Neither threads, instances nor CPUs named: the replica picks its layout at load, told the replica count.
    assert.deepEqual([order.deployment, order.model, order.threads, order.autoLayoutReplicas], ['mlp', 'mlp.onnx', undefined, 2]);
    assert.equal(order.secret, c.actor(order.actorId).secret, 'the process is started with the secret it will join with');
    assert.deepEqual(c.states('mlp'), ['mlp#0 STARTING', 'mlp#1 STARTING']);

    const first = await c.startAndReady(a.agent, 4242);
    assert.equal(first.a.pid, 4242);
    await flush();
    assert.equal(deploy.done, false, 'one replica of two is READY');
    await c.startAndReady(b.agent);
    await flush();
    assert.equal(deploy.done, true);
    assert.equal(deploy.value?.state, 'READY');
    assert.deepEqual(c.states('mlp'), ['mlp#0 READY', 'mlp#1 READY']);
    assert.deepEqual(c.state.deploymentView(c.state.deployments.get('mlp')!).metadata, META);
  });

  test('scheduling yields the event loop once a turn has used its slice, and places the rest in a later turn', async () => {
    // A slice of 0 ms: every turn finishes one deployment, the rest waits for a later turn.
    const c = cluster({ scheduleSliceMs: 0 });
    c.join('a', 8);
    const first = track(c.controller.deploy(c.spec('one', 2)));
    const second = track(c.controller.deploy(c.spec('two', 2)));
    const third = track(c.controller.deploy(c.spec('three', 1)));
    assert.deepEqual(c.states('one'), ['one#0 STARTING', 'one#1 STARTING'], 'the first pass of a turn always places a whole deployment');
    assert.deepEqual(c.states('two'), ['two#0 PENDING', 'two#1 PENDING'], 'the turn has used its slice');
    assert.deepEqual(c.states('three'), ['three#0 PENDING']);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(c.states('two'), ['two#0 STARTING', 'two#1 STARTING'], 'a later turn goes on');
    assert.deepEqual(c.states('three'), ['three#0 PENDING'], 'one deployment per turn');
    await flush();
    assert.deepEqual(c.states('three'), ['three#0 STARTING']);
    assert.deepEqual([first.done, second.done, third.done], [false, false, false]);
    c.controller.close();
  });

  test('a replica that fits nowhere is PENDING with the reason, and is placed when a node that fits joins', async () => {
    const c = cluster();
    const small = c.join('small', 1);
    const deploy = track(c.controller.deploy(c.spec('big', 1, { cpus: 2 })));
    const [a] = c.actorsOf('big');
    assert.equal(a!.state, 'PENDING');
    assert.equal(a!.reason, 'needs 2 CPUs; small has 1 of 1 CPUs free');
    assert.equal(small.agent.starts.length, 0);
    const large = c.join('large', 8);
    assert.equal(a!.state, 'STARTING');
    assert.equal(a!.reason, null);
    await c.startAndReady(large.agent);
    await flush();
    assert.equal(deploy.done, true);
  });

  test("once one replica fits nowhere, the deployment's other PENDING replicas carry the same reason, and are placed when room comes", () => {
    const c = cluster();
    const small = c.join('small', 2);
    void c.controller.deploy(c.spec('wide', 4, { cpus: 1 })).catch(() => {});
    assert.deepEqual(c.states('wide'), ['wide#0 STARTING', 'wide#1 STARTING', 'wide#2 PENDING', 'wide#3 PENDING']);
    const reasons = c.actorsOf('wide').map((a) => a.reason);
    assert.deepEqual(reasons.slice(2), ['needs 1 CPU; small has 0 of 2 CPUs free', 'needs 1 CPU; small has 0 of 2 CPUs free']);
    assert.equal(small.agent.starts.length, 2);
    const large = c.join('large', 8);
    assert.deepEqual(c.states('wide'), ['wide#0 STARTING', 'wide#1 STARTING', 'wide#2 STARTING', 'wide#3 STARTING']);
    assert.equal(large.agent.starts.length, 2);
    c.controller.close();
  });

  test('with no node at all the reason says so', () => {
    const c = cluster();
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    assert.equal(c.actorsOf('mlp')[0]!.reason, 'needs 1 CPU; no node is alive');
    c.controller.close();
  });

  test('an actor that cannot load its model makes the deploy a refusal: the new deployment is removed', async () => {
    const c = cluster();
    const { agent } = c.join('a');
    const deploy = c.controller.deploy(c.spec('mlp', 1));
    agent.nextStart().failed(new TroupeError('TROUPE_ERR_MODEL_PATH', "model 'mlp.onnx' not found"));
    await assert.rejects(
      deploy,
      (err: unknown) => err instanceof TroupeError && err.code === 'TROUPE_ERR_MODEL_PATH' && /mlp\.onnx/.test(err.message),
    );
    await flush();
    assert.equal(c.state.deployments.has('mlp'), false);
  });

  test('a start lost with its connection is a crash, restarted once the back-off is over', async () => {
    const c = cluster();
    const { agent } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    agent.nextStart().failed(new TroupeError('TROUPE_ERR_DEADLINE_EXCEEDED', "no answer to 'startActor' within 30000 ms"));
    await flush();
    const [a] = c.actorsOf('mlp');
    assert.equal(a!.state, 'RESTARTING');
    assert.match(a!.reason!, /^could not start on a: /);
    c.clock.advance(100);
    assert.equal(agent.starts.length, 1, 'started again');
    c.controller.close();
  });
});

describe('Controller: crashes and restarts', { timeout: 10_000 }, () => {
  test('a crashed actor restarts after a back-off that doubles with each recent crash; past maxRestarts it is DEAD', async () => {
    const c = cluster({ maxRestarts: 2 });
    const { agent, node } = c.join('a');
    const deploy = track(c.controller.deploy(c.spec('mlp', 1)));
    const { a, link } = await c.startAndReady(agent);
    const firstSecret = a.secret;

    c.controller.actorExited(a.id, exit(1, 'Segmentation fault'), node.id);
    assert.deepEqual([a.state, a.reason, a.restarts, a.nodeId], ['RESTARTING', 'exited with code 1: Segmentation fault', 1, null]);
    assert.equal(link.terminatedBecause, 'the actor process exited');
    c.clock.advance(99);
    assert.equal(agent.starts.length, 0, 'not before 100 ms');
    c.clock.advance(1);
    assert.equal(a.state, 'STARTING');
    const restart = agent.nextStart();
    assert.notEqual(restart.order.secret, firstSecret, 'a new secret shuts the old process out');

    c.controller.actorExited(a.id, exit(1), node.id);
    c.clock.advance(199);
    assert.equal(agent.starts.length, 0, 'the second crash waits 200 ms');
    c.clock.advance(1);
    agent.nextStart();

    c.controller.actorExited(a.id, exit(137), node.id);
    assert.equal(a.state, 'DEAD');
    assert.equal(a.reason, 'exited with code 137; gave up after 2 restarts in 600 s');
    c.clock.advance(60_000);
    assert.equal(agent.starts.length, 0, 'a DEAD actor is not started again');
    await flush();
    assert.equal(deploy.done, true, 'the deploy had already succeeded; a later death does not touch it');
    assert.equal(c.state.deploymentView(c.state.deployments.get('mlp')!).state, 'UNHEALTHY');
  });

  test('a deploy still waiting when its actor dies for good fails with ACTOR_DIED and the deployment stays', async () => {
    const c = cluster({ maxRestarts: 0 });
    const { agent, node } = c.join('a');
    const deploy = c.controller.deploy(c.spec('mlp', 1));
    const start = agent.nextStart();
    start.started(7);
    await flush();
    c.controller.actorExited(start.order.actorId, exit(1), node.id);
    await assert.rejects(deploy, { code: 'TROUPE_ERR_ACTOR_DIED', message: /mlp#0 is DEAD: exited with code 1/ });
    assert.equal(c.state.deployments.has('mlp'), true, 'a crash says nothing about the spec');
  });

  test('crashes older than the restart window are forgotten', async () => {
    const c = cluster({ maxRestarts: 1, restartWindowMs: 1000 });
    const { agent, node } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a } = await c.startAndReady(agent);
    c.controller.actorExited(a.id, exit(1), node.id);
    c.clock.advance(100);
    agent.nextStart();
    c.clock.advance(1000);
    c.controller.actorExited(a.id, exit(1), node.id);
    assert.equal(a.state, 'RESTARTING', 'the first crash is out of the window');
    c.clock.advance(100);
    assert.equal(agent.starts.length, 1, 'and the back-off starts over at 100 ms');
    c.controller.close();
  });

  test('an exit reported by a node the actor no longer runs on changes nothing', async () => {
    const c = cluster();
    const { agent } = c.join('a');
    const other = c.join('b');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a } = await c.startAndReady(agent);
    c.controller.actorExited(a.id, exit(1), other.node.id);
    assert.equal(a.state, 'READY');
  });

  test('an actor that disconnects and does not rejoin within the grace is stopped through its agent', async () => {
    const c = cluster({ adoptGraceMs: 5000 });
    const { agent } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 2)).catch(() => {});
    const first = await c.startAndReady(agent);
    const second = await c.startAndReady(agent);
    c.controller.actorDisconnected(first.a, first.link);
    c.controller.actorDisconnected(second.a, second.link);
    assert.deepEqual([first.a.state, first.a.reason], ['STARTING', 'reconnecting to the head']);
    c.clock.advance(4000);
    // The second rejoins in time on a new connection of the same process.
    c.controller.actorReady(second.a, new FakeActorLink(c.clock), META, '');
    c.clock.advance(1000);
    assert.deepEqual(agent.stops, [{ actorId: first.a.id, graceMs: 1000 }]);
    assert.equal(second.a.state, 'READY');
  });
});

describe('Controller: undeploy and scaling', { timeout: 10_000 }, () => {
  test('undeploy drains: a replica finishes its calls before its agent is asked to stop it', async () => {
    const c = cluster();
    const { agent, node } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a, link } = await c.startAndReady(agent);
    const call = c.state.deployments.get('mlp')!.dispatcher.submit(input());
    assert.equal(link.inFlight, 1);
    const removed = track(c.controller.undeploy('mlp'));
    assert.equal(c.state.deployments.has('mlp'), false);
    assert.deepEqual([a.state, a.reason], ['DRAINING', 'finishing in-flight calls before stopping']);
    await flush();
    assert.deepEqual(agent.stops, [], 'nothing is stopped while a call is in flight');
    link.answer();
    await call;
    await flush();
    assert.deepEqual(agent.stops, [{ actorId: a.id, graceMs: 10_000 }]);
    assert.equal(removed.done, true);
    c.controller.actorExited(a.id, exit(0), node.id);
    assert.equal(c.state.actors.has(a.id), false, 'forgotten once its process is gone');
  });

  test('a drain is bounded by drainMs: a call that never ends does not keep the replica', async () => {
    const c = cluster({ drainMs: 3000 });
    const { agent } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const { a, link } = await c.startAndReady(agent);
    void c.state.deployments
      .get('mlp')!
      .dispatcher.submit(input())
      .catch(() => {});
    const removed = track(c.controller.undeploy('mlp'));
    c.clock.advance(2999);
    await flush();
    assert.deepEqual(agent.stops, []);
    c.clock.advance(1);
    await flush();
    assert.deepEqual(agent.stops, [{ actorId: a.id, graceMs: 1000 }], 'the drain used its time: the process gets the least grace');
    assert.equal(removed.done, true);
    link.terminate('test over');
  });

  test('undeploying a name nobody deployed is UNKNOWN_DEPLOYMENT', async () => {
    const c = cluster();
    await assert.rejects(c.controller.undeploy('nope'), { code: 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', message: "no deployment named 'nope'" });
  });

  test('scaling up starts the replicas missing; scaling down drains the highest-numbered ones', async () => {
    const c = cluster();
    const [a, b] = [c.join('a'), c.join('b')];
    await Promise.all([c.controller.deploy(c.spec('mlp', 2)), c.startAndReady(a.agent), c.startAndReady(b.agent)]);

    const up = track(c.controller.deploy(c.spec('mlp', 3)));
    assert.deepEqual(c.states('mlp'), ['mlp#0 READY', 'mlp#1 READY', 'mlp#2 STARTING']);
    assert.equal(a.agent.starts.length + b.agent.starts.length, 1, 'only the new replica is started');
    await c.startAndReady(a.agent.starts.length ? a.agent : b.agent);
    await flush();
    assert.equal(up.value?.replicas, 3);

    const [, second, third] = c.actorsOf('mlp');
    const down = track(c.controller.deploy(c.spec('mlp', 1)));
    assert.deepEqual(c.states('mlp'), ['mlp#0 READY']);
    assert.deepEqual([second!.state, third!.state], ['DRAINING', 'DRAINING']);
    await flush();
    assert.equal(down.done, true);
    const stopped = [...a.agent.stops, ...b.agent.stops].map((s) => s.actorId).sort();
    assert.deepEqual(stopped, [second!.id, third!.id].sort());
  });

  test('a new model needs new actors: the old one serves until the new one is READY (a surge), then drains', async () => {
    const c = cluster();
    const { agent } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const old = await c.startAndReady(agent);
    const updated = track(c.controller.deploy({ ...c.spec('mlp', 1), model: 'mlp-v2.onnx' }));
    assert.equal(old.a.state, 'READY', 'the old replica serves on while the new one starts');
    assert.equal(c.state.deploymentView(c.state.deployments.get('mlp')!).state, 'DEPLOYING');
    const fresh = await c.startAndReady(agent);
    assert.equal(fresh.order.model, 'mlp-v2.onnx');
    assert.notEqual(fresh.a.id, old.a.id);
    await flush();
    assert.equal(old.a.state, 'DRAINING');
    assert.ok(updated.done && !updated.error, String(updated.error));
    assert.deepEqual(
      c.actorsOf('mlp').map((a) => a.id),
      [fresh.a.id],
    );
    c.controller.close();
  });

  test('a refused update (the new model does not load) leaves the serving replica as it was: no restart', async () => {
    const c = cluster();
    const { agent } = c.join('a');
    void c.controller.deploy(c.spec('mlp', 1)).catch(() => {});
    const old = await c.startAndReady(agent);
    const updated = track(c.controller.deploy({ ...c.spec('mlp', 1), model: 'broken.onnx' }));
    const start = agent.nextStart();
    start.started(2000);
    await flush();
    c.controller.actorLoadFailed(c.actor(start.order.actorId), { code: 'TROUPE_ERR_MODEL_LOAD', message: 'not an ONNX model' });
    await flush();
    assert.ok(updated.done, 'the update is answered');
    assert.match(String((updated.error as Error)?.message), /not an ONNX model; deployment 'mlp' keeps its previous spec/);
    assert.equal(old.a.state, 'READY');
    assert.equal(old.a.superseded, false);
    assert.deepEqual(
      c.actorsOf('mlp').map((a) => a.id),
      [old.a.id],
    );
    assert.equal(c.state.deployments.get('mlp')!.spec.model, 'mlp.onnx');
    assert.equal(agent.starts.length, 0, 'nothing restarts');
    c.controller.close();
  });

  test('with no room for the new replica beside the old, the old one makes room (a replace)', async () => {
    const c = cluster();
    const { agent } = c.join('a', 1);
    void c.controller.deploy(c.spec('mlp', 1, { cpus: 1 })).catch(() => {});
    const old = await c.startAndReady(agent);
    void c.controller.deploy({ ...c.spec('mlp', 1, { cpus: 1 }), model: 'mlp-v2.onnx' }).catch(() => {});
    assert.equal(old.a.state, 'DRAINING');
    c.controller.close();
  });
});
