import autocannon from 'autocannon';
import type { LoadResult } from './load.js';

/** Closed-loop HTTP load with autocannon: `concurrency` connections, one request in flight each. */
export async function httpLoad(request: { url: string; method?: string; headers?: Record<string, string>; body?: Buffer | string }, concurrency: number, seconds: number): Promise<LoadResult> {
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
