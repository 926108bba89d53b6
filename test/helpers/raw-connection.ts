import { connect } from 'node:net';
import type { Socket } from 'node:net';

/** A TCP connection a test writes raw HTTP bytes on, and what came back on it. */
export interface RawConnection {
  socket: Socket;
  /** Everything received (latin1), once the connection closed, or once a 30 s bound closed it. */
  answer: Promise<string>;
  isClosed: () => boolean;
}

/** Connects to `port` on loopback; resolves once connected. */
export async function rawConnection(port: number): Promise<RawConnection> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  let closed = false;
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  const answer = new Promise<string>((resolve) => {
    const bound = setTimeout(() => socket.destroy(), 30_000);
    socket.once('close', () => {
      closed = true;
      clearTimeout(bound);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, answer, isClosed: () => closed };
}
