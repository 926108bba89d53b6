import assert from 'node:assert/strict';
import { connect as tcpConnect } from 'node:net';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { connect } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { GRAPH_AGENT } from '../helpers/graphs.js';
import { SSE_WINDOW } from '../../head/http/sse.js';

/**
 * A server-sent event stream whose reader stopped reading (docs/actors.md, Streaming calls): the
 * generator is held at the reader's window plus what the socket's buffers hold (the head fixes
 * its send buffer), and once the
 * connection has taken nothing for the head's --stream-idle-s the stream is cancelled, freeing its
 * instance. The reader is a raw socket that reads the first bytes and then pauses.
 */
const PARITY = 'test/fixtures/ray-parity.js';
const ITEM_BYTES = 64 * 1024;

describe('bounded streams: a paused SSE reader', { timeout: 180_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let socket: Socket | undefined;

  before(async () => {
    cluster = await startCluster({ agents: [GRAPH_AGENT], headArgs: ['--stream-idle-s', '1'] });
    client = await connect(cluster.url);
  });
  after(async () => {
    socket?.destroy();
    await client?.close();
    await cluster?.stop();
  });

  test('holds the generator at its window plus the socket buffers, then is cancelled after the idle limit', async (t) => {
    // maxConcurrency 1: the open stream holds the instance, so a call answers only once it is cancelled.
    const sleeper = await client.actor({ name: 'idle-reader', module: PARITY, export: 'Sleeper', cpus: 0.1 });
    const url = new URL(cluster.url);
    const body = JSON.stringify({ args: [ITEM_BYTES] });
    const s = tcpConnect(Number(url.port), url.hostname);
    socket = s;
    let received = 0;
    const firstItem = new Promise<void>((resolve, reject) => {
      s.on('data', (chunk: Buffer) => {
        received += chunk.byteLength;
        if (received > ITEM_BYTES) {
          // The reader stops reading here, and never reads again.
          s.pause();
          resolve();
        }
      });
      s.on('error', reject);
    });
    s.write(
      `POST /api/v1/actors/idle-reader/blobs/stream HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await firstItem;
    // Answered once the idle limit cancelled the stream (the generator's finally ran).
    const events = await sleeper.withOptions({ timeoutMs: 120_000 }).call<string[]>('events');
    assert.deepEqual(events, ['blobs open', 'blobs closed']);
    const produced = await sleeper.call<number>('produced');
    // Nothing more is made for the paused reader.
    assert.equal(await sleeper.call('produced'), produced);
    // The window, and what the head's fixed send buffer (SSE_SEND_BUFFER_BYTES, doubled by the
    // kernel) and the reader's receive buffer hold of 64 KiB items: an autotuned send buffer let
    // the generator make 82.
    assert.ok(
      produced <= SSE_WINDOW + 3,
      `the generator made ${produced} items for a paused reader, past its window of ${SSE_WINDOW} and three more`,
    );
    t.diagnostic(
      `the paused reader read ${received} bytes; the generator made ${produced} items of ${ITEM_BYTES} bytes (${((produced * ITEM_BYTES) / 2 ** 20).toFixed(1)} MiB) before the stream was cancelled`,
    );
  });
});
