import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { DEFAULT_MAX_FRAME_BYTES, checkBearer, newSecret } from '../runtime/index.js';

export interface DirectServer {
  /** Where clients connect, e.g. `ws://127.0.0.1:41234/v1/direct`. */
  readonly url: string;
  /** The bearer token a client must present; the head hands it only to clients it admitted. */
  readonly token: string;
  close(): void;
}

/**
 * The actor's own endpoint for calls from SDK clients, so a call crosses two process hops instead
 * of four and the head never touches its tensors (at 600 KB an image, the head's copies and GC
 * were most of its CPU). The head stays the control plane: it tells admitted clients where each
 * READY replica listens and with which token, and still serves HTTP, graphs and futures.
 */
export async function startDirectServer(host: string, serve: (ws: WebSocket) => void): Promise<DirectServer> {
  const token = newSecret();
  const wss = new WebSocketServer({
    host,
    port: 0,
    path: '/v1/direct',
    maxPayload: DEFAULT_MAX_FRAME_BYTES,
    perMessageDeflate: false,
    verifyClient: (info: { req: IncomingMessage }) => checkBearer(info.req.headers, token),
  });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  // After listening, an error (a socket reset mid-handshake) must not take the actor down.
  wss.on('error', () => {});
  wss.on('connection', (ws) => serve(ws));
  const { port } = wss.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  return { url: `ws://${shown}:${port}/v1/direct`, token, close: () => wss.close() };
}
