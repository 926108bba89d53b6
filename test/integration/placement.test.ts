import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster, DeploymentView } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';

/** Where each replica runs, as `node/CUDA_VISIBLE_DEVICES` that its own process reported. */
const where = (view: DeploymentView) => view.actors.map((a) => `${a.node}/${a.visibleDevices}`).sort();

describe('placement on simulated GPUs, as docs/sdk.md describes it (real head, agents and actors)', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;

  before(async () => {
    // As `troupe up --simulate-gpus 2` starts it: one local agent with two GPUs.
    cluster = await startCluster({ agents: [['--name', 'local', '--cpus', '8', '--simulate-gpus', '2']] });
    client = await connect(cluster.url);
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
  });

  test("spread: two half-GPU replicas on one node take one GPU each (the README's example)", async () => {
    const view = await client.deploy({ name: 'spread', model: 'mlp.onnx', replicas: 2, gpus: 0.5, threads: 1 });
    assert.deepEqual(where(view), ['local/0', 'local/1']);
    assert.deepEqual(view.actors.map((a) => a.device).sort(), ['gpu:0', 'gpu:1']);
  });

  test('pack: replicas share one GPU before another is used', async () => {
    const view = await client.deploy({ name: 'packed', model: 'mlp.onnx', replicas: 2, gpus: 0.25, placement: 'pack', threads: 1 });
    assert.deepEqual(where(view), ['local/0', 'local/0']);
  });

  test('spread: with a second node, replicas go to different nodes first', async () => {
    await cluster.startAgent(['--name', 'other', '--cpus', '8', '--simulate-gpus', '2']);
    const view = await client.deploy({ name: 'across', model: 'mlp.onnx', replicas: 2, gpus: 0.5, threads: 1 });
    assert.deepEqual(view.actors.map((a) => a.node).sort(), ['local', 'other']);
    // local's gpu 0 is full (spread#0 and both packed replicas): its replica went to gpu 1.
    assert.deepEqual(where(view), ['local/1', 'other/0']);
  });
});
