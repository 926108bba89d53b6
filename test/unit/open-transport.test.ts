import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { test } from 'node:test';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { TroupeError, openFrameTransport } from '../../runtime/internal.js';

const OPTIONS = { maxFrameBytes: 1 << 20, pooled: false, timeoutMs: 5000 };

/**
 * A head from before frame streams spoke only WebSocket on its endpoints: `ws`'s own server
 * stands in for it here (it answers an upgrade to anything but WebSocket with 400). A client over
 * plain HTTP falls back to a WebSocket and carries frames both ways; a 401 is not retried.
 */
test('over plain HTTP, a server that only speaks WebSocket is reached with a WebSocket after the frame upgrade is declined', async () => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => wss.once('listening', resolve));
  const upgrades: string[] = [];
  wss.on('headers', (_headers, req) => upgrades.push(String(req.headers.upgrade)));
  const peer = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  try {
    const { port } = wss.address() as AddressInfo;
    const transport = await openFrameTransport(new URL(`http://127.0.0.1:${port}/v1/client`), {}, OPTIONS);
    const server = await peer;
    assert.deepEqual(upgrades, ['websocket'], 'one WebSocket handshake, after the declined frame upgrade');
    const got = new Promise<Buffer>((resolve) => server.once('message', (data: Buffer) => resolve(data)));
    transport.send([Buffer.from('ab'), Buffer.from('cd')]);
    assert.equal((await got).toString(), 'abcd', 'the parts of one frame arrive as one message');
    const back = new Promise<Buffer>((resolve) =>
      transport.start({ frame: (bytes) => resolve(bytes), refused: () => assert.fail('refused'), closed: () => {} }),
    );
    server.send(Buffer.from('pong'));
    assert.equal((await back).toString(), 'pong');
    transport.terminate();
  } finally {
    for (const client of wss.clients) client.terminate();
    wss.close();
  }
});

test('a 401 at the frame upgrade is TROUPE_ERR_UNAUTHORIZED, with no WebSocket attempt after it', async () => {
  const upgrades: string[] = [];
  const server = createServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    upgrades.push(String(req.headers.upgrade));
    socket.end('HTTP/1.1 401 Unauthorized\r\nx-troupe-error: wrong token\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    await assert.rejects(openFrameTransport(new URL(`ws://127.0.0.1:${port}/v1/client`), {}, OPTIONS), (err: unknown) => {
      assert.ok(err instanceof TroupeError);
      assert.equal(err.code, 'TROUPE_ERR_UNAUTHORIZED', err.message);
      assert.match(err.message, /HTTP 401 wrong token/);
      return true;
    });
    assert.deepEqual(upgrades, ['troupe-frames']);
  } finally {
    server.close();
  }
});
