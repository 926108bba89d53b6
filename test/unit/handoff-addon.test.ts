import assert from 'node:assert/strict';
import { connect, createServer, Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { handoffAddon } from '../../runtime/handoff/addon.js';

const addon = handoffAddon();
const skip = typeof addon === 'string' ? `the handoff addon is not available: ${addon}` : false;

/** The descriptor under a connected net.Socket (Linux). */
const fdOf = (socket: Socket) => (socket as unknown as { _handle: { fd: number } })._handle.fd;

test(
  'a TCP connection passed over the handoff socket is served by its receiver, the sender keeping nothing',
  { skip, timeout: 30_000 },
  async () => {
    if (typeof addon === 'string') return;
    const name = `troupe-test-${process.pid}-${Date.now()}`;
    const listening = addon.listen(name);
    const sender = addon.connect(name);
    const receiver = addon.accept(listening, process.pid);
    addon.close(listening);
    after(() => {
      addon.close(sender);
      addon.close(receiver);
    });
    assert.equal(addon.receive(receiver), -1, 'nothing queued yet');

    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    after(() => server.close());
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    const answer = new Promise<string>((resolve) => client.once('data', (b) => resolve(b.toString())));
    const serverSide = await accepted;
    serverSide.pause();

    assert.equal(addon.send(sender, fdOf(serverSide)), true);
    // The sender lets go of its copy: the connection lives on in the receiver's.
    serverSide.destroy();
    const fd = addon.receive(receiver);
    assert.ok(fd >= 0);
    const handed = new Socket({ fd, readable: true, writable: true });
    handed.write('served by the receiver');
    assert.equal(await answer, 'served by the receiver');
    client.destroy();
    handed.destroy();
  },
);

test('only the process named may take the pending connection', { skip, timeout: 30_000 }, () => {
  if (typeof addon === 'string') return;
  const name = `troupe-test-peer-${process.pid}-${Date.now()}`;
  const listening = addon.listen(name);
  const sender = addon.connect(name);
  after(() => [listening, sender].forEach((fd) => addon.close(fd)));
  assert.throws(() => addon.accept(listening, process.pid + 1), /the peer is not process/);
  assert.throws(() => addon.connect(`troupe-test-nobody-${process.pid}`), /connect: Connection refused/);
});
