import autocannon from 'autocannon';
import { Client } from 'undici';
import { h2load, h2loadAvailable } from './h2load.js';
import { closedLoop } from './load.js';
import type { LoadResult } from './load.js';

type Request = { url: string; method?: string; headers?: Record<string, string>; body?: Buffer | string };

/**
 * Sends `request` again at each call, on one kept-alive connection; a call resolves when the whole
 * answer has arrived. The client is undici, the lightest Node HTTP client at hand: it writes a
 * request's headers and body in one write, where `node:http` wrote them apart (two reads, two
 * wake-ups for the server) and took more of its own CPU per call (README's dependency table).
 */
export function keepAliveCaller(request: Request): { call: () => Promise<void>; close: () => void } {
  const url = new URL(request.url);
  const client = new Client(url.origin, { pipelining: 1 });
  const options = {
    path: `${url.pathname}${url.search}`,
    method: (request.method ?? 'GET') as 'GET',
    headers: request.headers ?? {},
    body: request.body ?? null,
  };
  return {
    call: async () => {
      const answer = await client.request(options);
      await answer.body.arrayBuffer();
      if (answer.statusCode >= 300) throw new Error(`HTTP ${answer.statusCode}`);
    },
    close: () => void client.close(),
  };
}

/**
 * Closed-loop HTTP load: `concurrency` connections, one request in flight each. At concurrency 1
 * the latency is what matters and autocannon reports it in whole milliseconds, so that run uses a
 * keep-alive client timed to the microsecond instead.
 */
export async function httpLoad(request: Request, concurrency: number, seconds: number, { warmUp = true } = {}): Promise<LoadResult> {
  if (concurrency === 1) {
    const caller = keepAliveCaller(request);
    try {
      return await closedLoop(caller.call, { concurrency: 1, seconds });
    } finally {
      caller.close();
    }
  }
  // A short unmeasured run first, so connection setup and JIT warm-up are not in the figures
  // (`warmUp: false` where the caller warmed up and counts the server's CPU over this run alone).
  if (warmUp) await autocannon({ ...request, connections: concurrency, duration: 0.5 });
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
    const body = JSON.stringify({
      inputs: [{ name: input, shape, datatype: 'FP32', data: Array.from(data) }],
      outputs: [{ name: output }],
    });
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

/** What loads the image runs: h2load over HTTP/1.1 where installed, else the Node client of httpLoad. */
export const IMAGE_LOAD_GENERATOR = h2loadAvailable() ? 'h2load --h1' : 'autocannon';

const answered = new Set<string>();

/**
 * Sends `request` once and throws unless it is answered 200 with an answer, h2load seeing statuses
 * only. An Open Inference Protocol request (binary tensors) must get outputs back: binary ones, or
 * JSON ones where a server ignores the binary-output parameter (KServe's ModelServer answers JSON);
 * another server's own form (Ray Serve's raw bytes, BentoML's JSON), a body.
 */
async function checkAnswered(request: HttpRequest): Promise<void> {
  if (answered.has(request.url)) return;
  const url = new URL(request.url);
  const client = new Client(url.origin);
  try {
    const answer = await client.request({ path: url.pathname, method: 'POST', headers: request.headers, body: request.body });
    const bytes = Buffer.from(await answer.body.arrayBuffer());
    const headerLength = Number(answer.headers['inference-header-content-length']);
    const refused = () =>
      new Error(`${request.url} answered ${answer.statusCode} with ${bytes.length} bytes: ${bytes.subarray(0, 200).toString()}`);
    if (answer.statusCode !== 200 || bytes.length === 0) throw refused();
    if (request.headers['inference-header-content-length'] === undefined) return void answered.add(request.url);
    const binary = headerLength > 0;
    if (binary && bytes.length <= headerLength) throw refused();
    const json = JSON.parse(bytes.subarray(0, binary ? headerLength : bytes.length).toString()) as { outputs?: unknown[] };
    if (!Array.isArray(json.outputs) || json.outputs.length === 0) throw refused();
  } finally {
    await client.close();
  }
  answered.add(request.url);
}

/**
 * Closed-loop load of large bodies (images): `concurrency` connections, one request in flight
 * each. Sending a 588 KiB body costs a Node client about twice the CPU h2load takes
 * (docs/front-door.md), CPU taken from the server it measures on these shared cores. With h2load,
 * one answer to the same request is checked first.
 */
export async function imageLoad(request: HttpRequest, concurrency: number, seconds: number): Promise<LoadResult> {
  if (IMAGE_LOAD_GENERATOR === 'autocannon') return httpLoad(request, concurrency, seconds);
  await checkAnswered(request);
  const body = typeof request.body === 'string' ? Buffer.from(request.body) : request.body;
  return h2load({ url: request.url, body, headers: request.headers, http1: true }, concurrency, seconds);
}
