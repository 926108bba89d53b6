import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ShutdownGate, findTarget, serveInPlace } from '../../runtime/internal.js';
import type { InPlaceOptions } from '../../runtime/internal.js';
import { createLogger } from '../../runtime/log.js';

// Bounds of the connection under test: long enough that a busy machine's pauses do not reach them
// between the requests a test sends, short enough to wait out.
const KEEP_ALIVE_MS = 3000;
const HEADERS_MS = 1500;
const HEALTH = 'GET /v2/health/live HTTP/1.1\r\nhost: x\r\n\r\n';

function options(): InPlaceOptions {
  const log = createLogger('test');
  log.level = 'silent';
  return {
    backend: { target: (params) => findTarget(params, () => undefined), run: () => Promise.reject(new Error('no model here')) },
    gate: new ShutdownGate(),
    token: undefined,
    host: '127.0.0.1',
    maxBodyBytes: 1 << 20,
    log,
    keepAliveTimeoutMs: KEEP_ALIVE_MS,
    headersTimeoutMs: HEADERS_MS,
    relay: () => Promise.resolve({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"live":true}' }),
    giveBack: (socket) => socket.destroy(),
  };
}

/** A client connection with what it has read so far, and whether the server has closed it. */
function client(port: number): { socket: Socket; text: () => string; closed: Promise<void>; isClosed: () => boolean } {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  let isClosed = false;
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  return { socket, text: () => text, closed, isClosed: () => isClosed };
}

async function until(what: string, ok: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const answers = (text: string) => text.split('HTTP/1.1 200 OK').length - 1;

describe('a connection served in place: its idle and header bounds', { timeout: 60_000 }, () => {
  let server: Server;
  let port = 0;
  before(async () => {
    server = createServer({ pauseOnConnect: true }, (socket) => serveInPlace(socket, Buffer.alloc(0), options()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('a connection that keeps asking stays open past its idle bound, and is dropped once quiet for it', async () => {
    const c = client(port);
    // Requests for two idle bounds' worth of time, each sent once the one before is answered and
    // a tenth of the bound has passed: each must push the connection's deadline on.
    const started = Date.now();
    let sent = 0;
    let answeredAt = 0;
    while (Date.now() - started < 2 * KEEP_ALIVE_MS) {
      c.socket.write(HEALTH);
      sent++;
      await until(`answer ${sent}`, () => answers(c.text()) === sent || c.isClosed());
      assert.equal(c.isClosed(), false, `dropped after ${sent} answers, ${Date.now() - started} ms in`);
      answeredAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, KEEP_ALIVE_MS / 10));
    }
    await c.closed;
    assert.ok(Date.now() - answeredAt >= KEEP_ALIVE_MS - 50, `dropped ${Date.now() - answeredAt} ms after the last answer`);
  });

  test('a request head left unfinished after an answer is dropped after the header bound', async () => {
    const c = client(port);
    c.socket.write(HEALTH);
    await until('the answer', () => answers(c.text()) === 1);
    const headFrom = Date.now();
    c.socket.write('GET /v2/health/live HTTP/1.1\r\nhost: x\r\n');
    await c.closed;
    const waited = Date.now() - headFrom;
    assert.ok(waited >= HEADERS_MS - 50, `dropped ${waited} ms after the head began`);
    assert.equal(answers(c.text()), 1);
  });

  test('a body that stops coming is dropped after the silent bound (the header bound, not the longer idle one)', async () => {
    const c = client(port);
    const from = Date.now();
    c.socket.write('POST /v2/models/m/infer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"inp');
    await c.closed;
    assert.ok(Date.now() - from >= HEADERS_MS - 50, `dropped ${Date.now() - from} ms after the body stopped`);
    assert.equal(c.text(), '');
  });

  test('a body-less request that says Connection: close is answered with close, and the connection ends', async () => {
    const c = client(port);
    c.socket.write('POST /v2/models/m/infer HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    await c.closed;
    assert.match(c.text(), /^HTTP\/1\.1 \d{3} /);
    assert.match(c.text(), /\r\nconnection: close\r\n/);
  });

  test('a body-less HTTP/1.1 request without Connection: close keeps its connection', async () => {
    const c = client(port);
    c.socket.write('POST /v2/models/m/infer HTTP/1.1\r\nhost: x\r\n\r\n');
    await until('the answer', () => c.text().includes('\r\n\r\n'));
    assert.match(c.text(), /\r\nconnection: keep-alive\r\n/);
    c.socket.write(HEALTH);
    await until('a second answer on the same connection', () => answers(c.text()) === 1);
    assert.equal(c.isClosed(), false);
    c.socket.destroy();
  });
});
