import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { ClusterState } from '../../head/state/cluster-state.js';
import type { NodeRecord } from '../../head/state/records.js';
import { EventFeed } from '../../head/status/event-feed.js';
import { StatusFrame } from '../../head/status/frame.js';
import { ClusterSampler } from '../../head/status/sampler.js';
import { StatusStream } from '../../head/status/stream.js';
import { DEFAULT_ACTOR_QUERY, DEFAULT_NODE_QUERY } from '../../head/status/windows.js';
import { waitFor } from '../helpers/cluster.js';

/** 200 nodes of 8 GPUs: only the fields the status page reads. A window of all of them is about half a megabyte. */
function bigCluster(): ClusterState {
  const state = new ClusterState();
  for (let i = 0; i < 200; i++) {
    const gpus = Array.from({ length: 8 }, (_, index) => ({
      index,
      uuid: `GPU-${i}-${index}`,
      name: 'Simulated GPU',
      memoryTotalMiB: 81920,
      memoryUsedMiB: 0,
      utilizationPct: 0,
      simulated: true,
    }));
    const node = {
      id: `n${i}`,
      name: `node-${i}`,
      state: 'ALIVE',
      address: '10.0.0.1',
      resources: { cpus: 64, memoryBytes: 2 ** 40, gpus },
    };
    state.nodes.set(node.id, node as unknown as NodeRecord);
  }
  return state;
}

describe('status stream: a page that stops reading', () => {
  test('gets no more than its connection holds, is not dropped, and catches up in fewer, folded updates', async (t) => {
    const state = bigCluster();
    const sampler = new ClusterSampler(state);
    const feed = new EventFeed(state, () => {});
    const graphs = { views: () => [], plan: () => undefined };
    const stream = new StatusStream(() => new StatusFrame(state, graphs, sampler, feed, false), sampler, feed);
    let res: ServerResponse | undefined;
    const server = createServer((_req, response) => {
      res = response;
      stream.open(response);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    try {
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
      socket.write('GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n');
      const viewer = await waitFor('the first update', () => /"viewer":"([^"]+)"/.exec(received)?.[1], 10_000, 5);
      // From here the page reads nothing.
      socket.pause();
      const all = { ...DEFAULT_NODE_QUERY, limit: 200 };
      const PUSHES = 100;
      let most = 0;
      for (let seq = 1; seq <= PUSHES; seq++) {
        // A new view each time: every update would be the whole window again.
        assert.equal(stream.view(viewer, seq, { ...all, offset: seq % 2 }, DEFAULT_ACTOR_QUERY), true);
        stream.push();
        most = Math.max(most, res!.writableLength);
      }
      const oneUpdate = 600 * 1024;
      assert.ok(most <= 256 * 1024 + oneUpdate, `the head held ${most} bytes for the page: at most its bound and one update`);
      assert.equal(res!.destroyed, false, 'the page is not dropped');
      assert.equal(stream.viewers, 1);

      // The page reads again: it gets the newest view, in far fewer updates than were pushed.
      received = '';
      socket.resume();
      const last = await waitFor('the last view', () => received.includes(`"viewSeq":${PUSHES},`) || undefined, 30_000, 10);
      assert.ok(last);
      const updates = (received.match(/event: update/g) ?? []).length;
      t.diagnostic(`at most ${most} bytes held for the page; ${updates} updates for ${PUSHES} pushes`);
      assert.ok(updates < PUSHES / 2, `${updates} updates for ${PUSHES} pushes`);
    } finally {
      socket.destroy();
      stream.close();
      await new Promise((resolve) => server.close(resolve));
      feed.close();
    }
  });
});
