import { WebSocket } from 'ws';
import { RoutesSchema, decodeFrame, encodeFrame } from '../../runtime/internal.js';
import type { Routes } from '../../runtime/internal.js';

/** The routes the head hands a client for `deployment` (replica addresses and tokens), asked over a raw socket. */
export async function routesOf(url: string, deployment: string): Promise<Routes> {
  const ws = new WebSocket(new URL('/v1/client', url.replace('http', 'ws')));
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const answer = new Promise<Record<string, unknown>>((resolve) =>
    ws.once('message', (data: Buffer) => resolve(decodeFrame(data)[0] as Record<string, unknown>)),
  );
  ws.send(encodeFrame([{ type: 'routes', id: 'r1', deployment }]));
  const reply = await answer;
  ws.close();
  return RoutesSchema.parse(reply.value);
}
