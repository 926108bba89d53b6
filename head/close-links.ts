import type { WebSocketServer } from 'ws';
import { HEAD_SHUTTING_DOWN } from '../runtime/internal.js';
import type { Channel } from '../runtime/internal.js';

/** What shutting down needs of a connection's channel. */
export type ClosableChannel = Pick<Channel<{ type: string }, { type: string }>, 'close' | 'terminate' | 'whenClosed'>;

/**
 * Closes every agent, actor and client link of a stopping head with a handshake, so the answers
 * already written arrive before the close; a peer that does not answer the handshake within a
 * second is dropped.
 */
export async function closeLinks(wss: WebSocketServer, streams: Set<ClosableChannel>): Promise<void> {
  // Let the last answers leave first: replies are coalesced into one write per turn.
  await new Promise((resolve) => setImmediate(resolve));
  const sockets = [...wss.clients];
  for (const ws of sockets) ws.close(1001, HEAD_SHUTTING_DOWN);
  const channels = [...streams];
  for (const channel of channels) channel.close(1001, HEAD_SHUTTING_DOWN);
  await Promise.race([
    Promise.all([
      ...sockets.map((ws) => (ws.readyState === ws.CLOSED ? undefined : new Promise((resolve) => ws.once('close', resolve)))),
      ...channels.map((channel) => channel.whenClosed),
    ]),
    new Promise((resolve) => setTimeout(resolve, 1000)),
  ]);
  for (const ws of wss.clients) ws.terminate();
  for (const channel of streams) channel.terminate();
  wss.close();
}
