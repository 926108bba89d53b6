import assert from 'node:assert/strict';
import { fstatSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as connectHttp2 } from 'node:http2';
import { createRequire } from 'node:module';
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { after, afterEach, describe, test } from 'node:test';
import {
  FrameStream,
  NODE_INTERNALS,
  descriptorOf,
  onInjectedHttp2Sessions,
  moveHandle,
  responseStarted,
  socketOverDescriptor,
  stopReading,
} from '../../runtime/internal.js';
import type { NodeInternal } from '../../runtime/internal.js';

// Each of Node's internals Troupe uses (runtime/node-internals.ts), checked on the Node line this
// runs on: a failure here names the internal and the line where it changed. CI runs this file on
// every line package.json's engines names. Then each fallback, with the internal turned off.

const LINE = `Node ${process.version}`;
const GRPC_VERSION = (createRequire(import.meta.url)('@grpc/grpc-js/package.json') as { version: string }).version;

/** A server that accepts without reading (as the head's listeners do), and a client connected to it. */
async function acceptedPair(): Promise<{ server: Server; client: Socket; accepted: Socket }> {
  let take: (socket: Socket) => void = () => {};
  const got = new Promise<Socket>((resolve) => (take = resolve));
  const server = createServer({ pauseOnConnect: true }, (socket) => take(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = connect((server.address() as { port: number }).port, '127.0.0.1');
  client.on('error', () => {});
  const accepted = await got;
  return { server, client, accepted };
}

/** Reads into buffers of our own (Node's `onread`), as the frame streams and in-place HTTP do. */
function reader(): { onread: { buffer: () => Uint8Array; callback: (n: number, b: Uint8Array) => boolean }; text: () => string } {
  const scratch = Buffer.alloc(64 * 1024);
  let text = '';
  return {
    onread: {
      buffer: () => scratch,
      callback: (n, b) => {
        text += Buffer.from(b.buffer, b.byteOffset, n).toString('latin1');
        return true;
      },
    },
    text: () => text,
  };
}

async function until(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const servers: Server[] = [];
const sockets: Socket[] = [];
after(() => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});

async function pair() {
  const p = await acceptedPair();
  servers.push(p.server);
  sockets.push(p.client, p.accepted);
  return p;
}

describe(`Node's internals on ${LINE}`, () => {
  test("socket-handle: an accepted socket's handle moves to a socket that reads into our buffers", async () => {
    const { client, accepted } = await pair();
    const r = reader();
    const moved = moveHandle(accepted, { onread: r.onread, readable: true, writable: true });
    assert.ok(moved, `${LINE}: net.Socket._handle is no longer a libuv stream handle (readStart/readStop) that can be moved`);
    sockets.push(moved);
    assert.ok(accepted.destroyed, 'the shell is destroyed');
    client.write('first bytes');
    await until('the bytes in our buffer', () => r.text() === 'first bytes');
    moved.write('answer');
    let back = '';
    client.on('data', (chunk: Buffer) => (back += chunk.toString()));
    await until('the answer through the moved handle', () => back === 'answer');
  });

  test('socket-fd: the descriptor under a socket', async () => {
    const { accepted } = await pair();
    const fd = descriptorOf(accepted);
    assert.ok(fd !== undefined, `${LINE}: net.Socket._handle.fd is gone: connections can no longer be handed to replicas`);
    assert.ok(fstatSync(fd).isSocket(), `${LINE}: _handle.fd ${fd} is not the socket's descriptor`);
    accepted.destroy();
    assert.equal(descriptorOf(accepted), undefined, 'a closed socket has none');
  });

  test('read-stop: bytes after the first chunk stay in the kernel, to travel with the descriptor', async () => {
    const { client, accepted } = await pair();
    const first = new Promise<Buffer>((resolve) => accepted.once('data', resolve));
    accepted.resume();
    client.write('GET /v2 HTTP/1.1\r\n');
    const chunk = await first;
    accepted.pause();
    const head = stopReading(accepted, chunk);
    assert.ok(head, `${LINE}: the stream handle's readStop (or net.Socket._read) is gone`);
    assert.equal(head.toString(), 'GET /v2 HTTP/1.1\r\n');
    assert.equal(
      (accepted as unknown as { _handle: { reading: boolean } })._handle.reading,
      false,
      `${LINE}: readStop left the handle reading`,
    );
    // Written after the stop: read by whoever takes the handle next, never by this socket.
    client.write('host: x\r\n\r\n');
    const r = reader();
    const moved = moveHandle(accepted, { onread: r.onread, readable: true, writable: true });
    assert.ok(moved);
    sockets.push(moved);
    await until(`${LINE}: the bytes after a stop reach the handle's next reader`, () => r.text() === 'host: x\r\n\r\n');
  });

  test('manual-start: a socket over a descriptor reads nothing until its handle is moved', async () => {
    const { client, accepted } = await pair();
    const fd = descriptorOf(accepted)!;
    // As a descriptor received from another process: a socket of its own over it, the only one
    // that closes it (the accepted socket lets go of its handle without closing it).
    (accepted as unknown as { _handle: unknown })._handle = null;
    const own = socketOverDescriptor(fd);
    sockets.push(own);
    const handle = (own as unknown as { _handle?: { reading?: boolean } })._handle;
    assert.equal(handle?.reading, false, `${LINE}: new Socket({ fd, manualStart: true }) began reading`);
    client.write('kept for the mover');
    const r = reader();
    const moved = moveHandle(own, { onread: r.onread, readable: true, writable: true });
    assert.ok(moved, `${LINE}: a manualStart socket's handle could not be moved`);
    sockets.push(moved);
    await until('the bytes in our buffer', () => r.text() === 'kept for the mover');
  });

  test("grpc-http2-servers: the HTTP/2 sessions of a grpc-js server's injected connections get wide windows", async () => {
    const grpc = new GrpcServer();
    const injector = grpc.createConnectionInjector(ServerCredentials.createInsecure());
    const widened: unknown[] = [];
    const found = onInjectedHttp2Sessions(grpc, (session) => {
      session.setLocalWindowSize(16 * 2 ** 20);
      session.settings({ initialWindowSize: 4 * 2 ** 20 });
      widened.push(session);
    });
    assert.ok(
      found,
      `grpc-js ${GRPC_VERSION} on ${LINE}: Server.http2Servers is not a Map of HTTP/2 servers any more: gRPC keeps 64 KiB windows`,
    );
    const server = createServer({ pauseOnConnect: true }, (socket) => {
      injector.injectConnection(socket);
      socket.resume();
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = connectHttp2(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    client.on('error', () => {});
    try {
      // What the client is told: the server's stream window, in its SETTINGS.
      await until(`${LINE}: the client told of a 4 MiB stream window`, () => client.remoteSettings?.initialWindowSize === 4 * 2 ** 20);
      assert.equal(widened.length, 1);
    } finally {
      client.destroy();
      injector.destroy();
    }
  });

  test('http-message: the response an HTTP server is writing on a socket', async () => {
    let seen: [boolean, boolean] | undefined;
    const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
      const before = responseStarted(req.socket as Socket);
      res.flushHeaders();
      seen = [before, responseStarted(req.socket as Socket)];
      res.end();
    });
    servers.push(server as unknown as Server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await fetch(`http://127.0.0.1:${port}/`).then((r) => r.text());
    assert.deepEqual(seen, [false, true], `${LINE}: socket._httpMessage no longer says whether a response's head was sent`);
  });
});

describe('without them, the callers still serve', () => {
  const off = (names: NodeInternal[] | 'all') => (process.env.TROUPE_NODE_INTERNALS_OFF = names === 'all' ? 'all' : names.join(','));
  afterEach(() => delete process.env.TROUPE_NODE_INTERNALS_OFF);

  test('every internal off: each accessor declines', async () => {
    off('all');
    const { accepted } = await pair();
    assert.equal(moveHandle(accepted, { onread: reader().onread, readable: true, writable: true }), undefined);
    assert.equal(descriptorOf(accepted), undefined);
    assert.equal(stopReading(accepted, Buffer.from('x')), undefined);
    assert.equal(
      onInjectedHttp2Sessions(new GrpcServer(), () => {}),
      false,
    );
    assert.equal(responseStarted(accepted), false);
    assert.equal(accepted.destroyed, false, 'a declined socket is left as it was');
    assert.deepEqual([...NODE_INTERNALS].sort(), [
      'grpc-http2-servers',
      'http-message',
      'manual-start',
      'read-stop',
      'socket-fd',
      'socket-handle',
    ]);
  });

  test('socket-handle off: a frame stream reads Node chunks, copying them, and still delivers frames', async () => {
    off(['socket-handle']);
    const { client, accepted } = await pair();
    const stream = FrameStream.adopt(accepted, { maxFrameBytes: 1 << 20, pooled: false });
    assert.equal(stream.readsInPlace, false);
    const frames: string[] = [];
    stream.start({ frame: (frame: Uint8Array) => void frames.push(Buffer.from(frame).toString()), closed: () => {}, refused: () => {} });
    const body = Buffer.from('a frame');
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(body.length);
    client.write(Buffer.concat([prefix, body]));
    await until('the frame', () => frames.length === 1);
    assert.deepEqual(frames, ['a frame']);
  });
});
