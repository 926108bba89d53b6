import { Agent, request } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { HttpAnswer } from './infer-exchange.js';

/** The most a relayed answer may hold: the protocol's reads (health, metadata) are small. */
const MAX_RELAYED_BYTES = 4 * 2 ** 20;
const RELAY_TIMEOUT_MS = 30_000;
/** Hop-by-hop headers: they describe one connection, not the answer, and are not passed on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/**
 * Asks the head, on its internal loopback port, for a read of the inference protocol (health,
 * server and model metadata) that arrived on a worker's connection, so a client that checks a
 * model before inferring on the same kept-alive connection (as Triton's clients do) keeps that
 * connection on the worker. The head answers it exactly as it answers its own connections.
 */
export function relayToHead(port: number): (url: string, headers: IncomingHttpHeaders) => Promise<HttpAnswer> {
  const agent = new Agent({ keepAlive: true });
  return (url, headers) =>
    new Promise((resolve) => {
      const failed = (why: string) =>
        resolve({
          status: 502,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: JSON.stringify({ error: `the head did not answer GET ${url.slice(0, 200)}: ${why}`, code: 'TROUPE_ERR_INTERNAL' }),
        });
      const forwarded = Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name) && name !== 'upgrade'));
      const req = request(
        { host: '127.0.0.1', port, method: 'GET', path: url, headers: forwarded, agent, timeout: RELAY_TIMEOUT_MS },
        (res) => {
          const chunks: Buffer[] = [];
          let length = 0;
          res.on('data', (chunk: Buffer) => {
            length += chunk.length;
            if (length > MAX_RELAYED_BYTES) res.destroy(new Error('the answer is too large to relay'));
            else chunks.push(chunk);
          });
          res.on('error', (err) => failed(err.message));
          res.on('end', () => {
            const passed: Record<string, string | number> = {};
            for (const [name, value] of Object.entries(res.headers))
              if (value !== undefined && !HOP_BY_HOP.has(name)) passed[name] = Array.isArray(value) ? value.join(', ') : value;
            resolve({ status: res.statusCode ?? 502, headers: passed, body: Buffer.concat(chunks) });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${RELAY_TIMEOUT_MS} ms`)));
      req.on('error', (err) => failed(err.message));
      req.end();
    });
}
