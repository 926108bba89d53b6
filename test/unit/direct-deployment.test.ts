import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { TroupeError, toWire, tensor } from '../../runtime/internal.js';
import { DirectDeployment } from '../../runtime/client/direct-deployment.js';
import { waitFor } from '../helpers/cluster.js';

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('a replica the client cannot reach takes no calls, and with none left a call fails NOT_READY (which the SDK sends through the head)', async () => {
  const d = new DirectDeployment('m');
  const port = await closedPort();
  d.update({
    deployment: 'm',
    replicas: [{ actor: 'a1', url: `tcp://127.0.0.1:${port}`, token: 't'.repeat(32) }],
    perReplicaLimit: 2,
    maxQueue: 10,
    maxRetries: 1,
  });
  assert.equal(d.usable, false, 'not usable before its socket opens');
  await waitFor('the connection to fail', () => !d.couldServe() || undefined, 10_000);
  assert.equal(d.usable, false);
  assert.match(d.describeReplicas(), /unreachable/);
  await assert.rejects(d.queue.submit({ x: toWire(tensor('float32', [1], Float32Array.of(1))) }), (err: unknown) => {
    assert.ok(err instanceof TroupeError);
    assert.equal(err.code, 'TROUPE_ERR_NOT_READY');
    return true;
  });
  d.close();
});

test('a client that reached the head over TLS never opens a plain tcp:// replica: not one byte, and its calls go through the head', async () => {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const d = new DirectDeployment('m', undefined, { rejectUnauthorized: true });
  try {
    d.update({
      deployment: 'm',
      replicas: [{ actor: 'a1', url: `tcp://127.0.0.1:${port}`, token: 't'.repeat(32) }],
      perReplicaLimit: 2,
      maxQueue: 10,
      maxRetries: 1,
    });
    await waitFor('the replica to be given up', () => !d.couldServe() || undefined, 10_000);
    assert.equal(d.usable, false);
    assert.match(d.describeReplicas(), /unreachable/);
    assert.equal(connections, 0, 'no connection was opened');
  } finally {
    d.close();
    server.close();
  }
});
