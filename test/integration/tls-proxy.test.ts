import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { Server as TlsServer } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import { routesOf } from '../helpers/routes.js';
import type { TestCluster } from '../helpers/cluster.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';

const TLS_DIR = fileURLToPath(new URL('../../../test/fixtures/tls/', import.meta.url));

/** What one connection through the proxy asked for first: its request line and Upgrade header. */
interface Seen {
  request: string;
  upgrade: string;
}

/**
 * A head is often reached through a TLS-terminating proxy, which passes WebSockets but not an
 * upgrade to an unknown protocol. Given an https: URL, an agent, the actors it starts and the SDK
 * reach the head through such a proxy with WebSockets (over plain HTTP they upgrade to frame
 * streams), and runs still give onnxruntime's numbers. Behind such a proxy the replicas' direct
 * ports are plain TCP (the head has no TLS of its own here), so a client that came over TLS sends
 * them nothing: every run goes through the proxy. The proxy is a TLS server in this process that
 * forwards each connection to the head, with a self-signed certificate from test/fixtures/tls that
 * the cluster's processes trust through NODE_EXTRA_CA_CERTS, and the SDK through its `tls` option.
 */
describe('through a TLS proxy in front of the head', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let client: Cluster;
  let proxy: TlsServer;
  let proxied: string;
  const seen: Seen[] = [];

  before(async () => {
    cluster = await startCluster({ agents: [], env: { NODE_EXTRA_CA_CERTS: `${TLS_DIR}cert.pem` } });
    const headPort = Number(new URL(cluster.url).port);
    proxy = createTlsServer({ key: readFileSync(`${TLS_DIR}key.pem`), cert: readFileSync(`${TLS_DIR}cert.pem`) }, (outside) => {
      const inside = connectTcp(headPort, '127.0.0.1');
      const drop = () => (outside.destroy(), inside.destroy());
      outside.once('data', (first: Buffer) => {
        const text = first.toString('latin1');
        seen.push({ request: text.split('\r\n')[0] ?? '', upgrade: /^upgrade: *(.*)$/im.exec(text)?.[1]?.trim().toLowerCase() ?? '' });
      });
      outside.pipe(inside).pipe(outside);
      for (const end of [outside, inside]) end.on('error', drop).on('close', drop);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as AddressInfo;
    proxied = `https://localhost:${port}`;
    await cluster.startAgent(['--name', 'behind-tls'], proxied);
    client = await connect(proxied, { tls: { ca: readFileSync(`${TLS_DIR}cert.pem`) } });
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    proxy?.close();
  });

  test('the SDK, the agent and its actor connect with WebSockets through the proxy, and every run goes through it, right', async () => {
    const view = await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    assert.equal(view.state, 'READY');
    await waitFor('the actor connection through the proxy', () => seen.find((s) => s.request.startsWith('GET /v1/actor ')), 10_000);
    assert.deepEqual(
      seen.map((s) => `${s.request.split(' ')[1]} ${s.upgrade}`).sort(),
      ['/v1/actor websocket', '/v1/agent websocket', '/v1/client websocket'],
      'one WebSocket each for the SDK, the agent and its actor',
    );
    const x = tensor('float32', [4, 64], seededFloats(4 * 64, 11));
    const want = await runInProcess(cluster.models.mlp, { x });
    // Direct runs are on (the default): the client asks for the routes, is told of a plain tcp://
    // replica, and keeps its runs on the proxied connection.
    const routes = await routesOf(cluster.url, 'mlp');
    assert.match(routes.replicas[0]?.url ?? '', /^tcp:\/\//, 'the replica takes direct calls in clear');
    const runs = Array.from({ length: 8 }, () => client.run('mlp', { x }));
    for (const f of runs) assert.deepEqual([...((await f).logits!.data as Float32Array)], [...(want.logits!.data as Float32Array)]);
    // Sequential runs give the routes time to arrive: none of them may go to the replica.
    for (let i = 0; i < 8; i++) {
      const f = client.run('mlp', { x });
      await f;
      assert.equal(f.resolvedHere, false, `run ${i} went to the replica in clear`);
    }
  });
});
