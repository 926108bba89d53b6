import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Controller } from '../../head/control/controller.js';
import { watchLiveness } from '../../head/control/liveness.js';
import { ClusterState } from '../../head/state/cluster-state.js';
import type { Clock } from '../../head/control/clock.js';
import { createLogger } from '../../runtime/internal.js';
import { FakeAgent } from '../helpers/fake-agent.js';
import { ManualClock } from '../helpers/manual-clock.js';

// White-box: the rule on its own, over a real controller whose agent connection is a fake. The
// real-process version (SIGSTOP of a head) is test/integration/liveness-pause.test.ts.

const OPTIONS = { suspectAfterMs: 200, deadAfterMs: 500 };

function cluster(clock?: Clock) {
  const state = new ClusterState();
  const log = createLogger('test');
  log.level = 'silent';
  const controller = new Controller(state, log, clock ? { clock } : {});
  const agent = new FakeAgent();
  const node = controller.nodes.agentRegistered(
    { name: 'n1', address: '127.0.0.1', resources: { cpus: 1, memoryBytes: 2 ** 30, gpus: [] } },
    [],
    agent,
  );
  const lost = () =>
    state.events
      .recent(100)
      .filter((e) => e.kind === 'node-lost')
      .map((e) => e.message);
  return { state, controller, log, node, agent, lost };
}

/** One turn of the event loop: liveness judges in a setImmediate after its tick. */
const turn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // The head is not running: nothing it could observe happens now.
  }
}

test("the head's own stall is not counted as a node's silence (system clock, blocked event loop)", async () => {
  const { controller, log, state, node, lost } = cluster();
  const stop = watchLiveness(state, controller, log, OPTIONS);
  try {
    await sleep(60);
    controller.nodes.nodeHeartbeat(node, { type: 'heartbeat' });
    // Longer than deadAfterMs: judged without the credit, the node would be DEAD.
    block(600);
    await sleep(80);
    assert.deepEqual(lost(), [], 'no node is lost for time the head did not observe');
    assert.equal(node.state, 'ALIVE');
  } finally {
    stop();
    controller.close();
  }
});

test('a node silent while the head runs is SUSPECT, then DEAD, and its connection is dropped', async () => {
  const clock = new ManualClock();
  const { controller, log, state, node, agent, lost } = cluster(clock);
  const stop = watchLiveness(state, controller, log, OPTIONS, clock);
  try {
    clock.advance(150);
    await turn();
    assert.equal(node.state, 'ALIVE');
    clock.advance(50);
    await turn();
    assert.equal(node.state, 'SUSPECT', 'silent for 200 ms');
    clock.advance(300);
    await turn();
    assert.equal(node.state, 'DEAD', 'silent for 500 ms');
    assert.equal(agent.closed, true);
    assert.deepEqual(lost(), ['n1 DEAD after 500 ms without a heartbeat']);
  } finally {
    stop();
    controller.close();
  }
});

test('a heartbeat resets the silence; a SUSPECT node that heartbeats is ALIVE again', async () => {
  const clock = new ManualClock();
  const { controller, log, state, node } = cluster(clock);
  const stop = watchLiveness(state, controller, log, OPTIONS, clock);
  try {
    for (let i = 0; i < 10; i++) {
      clock.advance(150);
      controller.nodes.nodeHeartbeat(node, { type: 'heartbeat' });
      await turn();
      assert.equal(node.state, 'ALIVE', `after ${(i + 1) * 150} ms with heartbeats`);
    }
    clock.advance(250);
    await turn();
    assert.equal(node.state, 'SUSPECT');
    controller.nodes.nodeHeartbeat(node, { type: 'heartbeat' });
    assert.equal(node.state, 'ALIVE');
  } finally {
    stop();
    controller.close();
  }
});

test('a stall right after a tick, before its judging, is credited too (a long callback in the same turn)', async () => {
  const clock = new ManualClock();
  const { controller, log, state, node, lost } = cluster(clock);
  const stop = watchLiveness(state, controller, log, OPTIONS, clock);
  try {
    // The tick runs and asks for its judging; a heartbeat is read; then the head blocks for 600 ms
    // before the judging runs (the late tick that would credit it comes only after).
    clock.advance(50);
    controller.nodes.nodeHeartbeat(node, { type: 'heartbeat' });
    clock.stall(600);
    await turn();
    assert.deepEqual(lost(), [], 'no node is lost for time the head did not observe');
    assert.equal(node.state, 'ALIVE');
    clock.advance(0);
    await turn();
    assert.equal(node.state, 'ALIVE', 'nor is the stall credited twice into a future lastSeen');
    clock.advance(500);
    await turn();
    assert.equal(node.state, 'DEAD', 'silence after the stall counts again');
  } finally {
    stop();
    controller.close();
  }
});

test('a stall of the head (its clock jumps, its timer late) is credited to every node', async () => {
  const clock = new ManualClock();
  const { controller, log, state, node, lost } = cluster(clock);
  const stop = watchLiveness(state, controller, log, OPTIONS, clock);
  try {
    clock.advance(100);
    clock.stall(5000);
    clock.advance(0);
    await turn();
    assert.equal(node.state, 'ALIVE', 'five seconds no one observed');
    assert.deepEqual(lost(), []);
    // Silence after the stall counts again.
    clock.advance(500);
    await turn();
    assert.equal(node.state, 'DEAD');
  } finally {
    stop();
    controller.close();
  }
});
