import { WebSocket } from 'ws';
import { RoutesSchema, decodeFrame, encodeFrame } from '../../runtime/internal.js';
import type { Routes } from '../../runtime/internal.js';

/**
 * The routes the head hands a client for `deployment` (replica addresses and tokens), asked over a
 * raw socket (over WSS for an https: URL, trusting `options.ca`).
 */
export async function routesOf(
  url: string,
  deployment: string,
  options: { ca?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Routes> {
  const ws = new WebSocket(new URL('/v1/client', url.replace('http', 'ws')), {
    ...(options.ca !== undefined ? { ca: options.ca } : {}),
    ...(options.headers ? { headers: options.headers } : {}),
  });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  const answer = new Promise<Record<string, unknown>>((resolve) =>
    ws.once('message', (data: Buffer) => resolve(decodeFrame(data)[0] as Record<string, unknown>)),
  );
  ws.send(encodeFrame([{ type: 'routes', id: 'r1', deployment }]));
  const reply = await answer;
  ws.close();
  return RoutesSchema.parse(reply.value);
}
