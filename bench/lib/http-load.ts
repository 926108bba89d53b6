import { Agent, request as httpRequest } from 'node:http';
import autocannon from 'autocannon';
import { closedLoop } from './load.js';
import type { LoadResult } from './load.js';

type Request = { url: string; method?: string; headers?: Record<string, string>; body?: Buffer | string };

/** One request on a kept-alive connection; resolves when the whole answer has arrived. */
function send(agent: Agent, r: Request): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(r.url, { agent, method: r.method ?? 'GET', headers: r.headers }, (res) => {
      res.on('data', () => {});
      res.on('end', () => (res.statusCode && res.statusCode < 300 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Sends `request` again at each call, on one kept-alive connection. */
export function keepAliveCaller(request: Request): { call: () => Promise<void>; close: () => void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return { call: () => send(agent, request), close: () => agent.destroy() };
}

/**
 * Closed-loop HTTP load: `concurrency` connections, one request in flight each. At concurrency 1
 * the latency is what matters and autocannon reports it in whole milliseconds, so that run uses a
 * plain keep-alive Node client timed to the microsecond instead.
 */
export async function httpLoad(request: Request, concurrency: number, seconds: number): Promise<LoadResult> {
  if (concurrency === 1) {
    const caller = keepAliveCaller(request);
    try {
      return await closedLoop(caller.call, { concurrency: 1, seconds });
    } finally {
      caller.close();
    }
  }
  // A short unmeasured run first, so connection setup and JIT warm-up are not in the figures.
  await autocannon({ ...request, connections: concurrency, duration: 0.5 });
  const r = await autocannon({ ...request, connections: concurrency, duration: seconds, pipelining: 1 });
  return {
    concurrency,
    requests: r.requests.total,
    errors: r.errors + r.non2xx + r.timeouts,
    seconds: r.duration,
    rps: r.requests.total / r.duration,
    p50Ms: r.latency.p50,
    p90Ms: r.latency.p90,
    p99Ms: r.latency.p99,
  };
}

/** An Open Inference Protocol request for one float32 input, as JSON or with the binary extension. */
export interface HttpRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: Buffer | string;
}

export function oipRequest(url: string, input: string, shape: number[], data: Float32Array, output: string, binary: boolean): HttpRequest {
  if (!binary) {
    const body = JSON.stringify({ inputs: [{ name: input, shape, datatype: 'FP32', data: Array.from(data) }], outputs: [{ name: output }] });
    return { url, method: 'POST', headers: { 'content-type': 'application/json' }, body };
  }
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: input, shape, datatype: 'FP32', parameters: { binary_data_size: data.byteLength } }],
      outputs: [{ name: output, parameters: { binary_data: true } }],
    }),
  );
  return {
    url,
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.byteLength) },
    body: Buffer.concat([header, Buffer.from(data.buffer, data.byteOffset, data.byteLength)]),
  };
}
