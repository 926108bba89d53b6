import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Controller } from '../../head/controller.js';
import { watchLiveness } from '../../head/liveness.js';
import { ClusterState } from '../../head/state.js';
import type { NodeRecord } from '../../head/state.js';
import { createLogger } from '../../runtime/index.js';

// White-box: the rule on its own, with the head's stall made by blocking this event loop.
// The real-process version (SIGSTOP of a head) is test/integration/liveness-pause.test.ts.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function cluster(): { state: ClusterState; lost: string[]; controller: Controller; node: NodeRecord } {
  const state = new ClusterState();
  const lost: string[] = [];
  const controller = { nodeLost: (n: NodeRecord) => lost.push(n.name) } as unknown as Controller;
  const node: NodeRecord = {
    id: 'n1',
    name: 'n1',
    address: '127.0.0.1',
    state: 'ALIVE',
    resources: { cpus: 1, memoryBytes: 1, gpus: [] } as unknown as NodeRecord['resources'],
    channel: undefined,
    lastSeen: Date.now(),
    usage: null,
  };
  state.nodes.set(node.id, node);
  return { state, lost, controller, node };
}

function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // The head is not running: nothing it could observe happens now.
  }
}

test("the head's own stall is not counted as a node's silence", async () => {
  const { state, lost, controller, node } = cluster();
  const stop = watchLiveness(state, controller, createLogger('test'), { suspectAfterMs: 200, deadAfterMs: 500 });
  try {
    await sleep(100);
    node.lastSeen = Date.now();
    block(1500);
    await sleep(80);
    assert.deepEqual(lost, [], 'no node is lost for time the head did not observe');
    assert.equal(node.state, 'ALIVE');
  } finally {
    stop();
  }
});

test('a node silent while the head runs is still SUSPECT, then DEAD', async () => {
  const { state, lost, controller, node } = cluster();
  const stop = watchLiveness(state, controller, createLogger('test'), { suspectAfterMs: 200, deadAfterMs: 500 });
  try {
    await sleep(350);
    assert.equal(node.state, 'SUSPECT');
    const deadline = Date.now() + 3000;
    while (lost.length === 0 && Date.now() < deadline) await sleep(25);
    assert.deepEqual(lost, ['n1']);
    assert.equal(node.state, 'DEAD');
  } finally {
    stop();
  }
});
