import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { percentile } from './load.js';
import type { LoadResult } from './load.js';

/**
 * Closed-loop load from h2load (Debian's nghttp2-client: `apt-get install -y nghttp2-client`), a C
 * load generator that sends one request body again and again. On this machine the load generator
 * shares the cores with what it measures: h2load takes a fraction of the CPU a JavaScript client
 * takes for the same requests (docs/front-door.md), so its figures measure the server,
 * as Triton's perf_analyzer (C++) does for Triton.
 */

/** Whether h2load is installed (else the benches fall back to a Node client). */
export function h2loadAvailable(): boolean {
  return spawnSync('h2load', ['--version'], { stdio: 'ignore' }).status === 0;
}

export interface H2loadRequest {
  url: string;
  body: Buffer;
  headers: Record<string, string>;
  /** HTTP/1.1 (`--h1`): one connection per request in flight; else HTTP/2, every stream on one connection. */
  http1: boolean;
  /** HTTP/1.1 only: requests in flight on each connection (pipelined), so `concurrency / pipelined` connections. Default 1. */
  pipelined?: number;
  /**
   * Whether to time each request (h2load's per-request log, for the percentiles). Writing that log
   * costs h2load CPU for every request; without it the percentiles are NaN. Default true.
   */
  latencies?: boolean;
}

/** h2load's count of answers by status class, `status codes: N 2xx, N 3xx, N 4xx, N 5xx`, and its errored requests (timed-out ones among them). */
function counts(output: string): { ok: number; failed: number } {
  const status = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(output);
  const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
    output,
  );
  if (!status || !requests) throw new Error(`h2load printed no summary:\n${output.slice(-2000)}`);
  const [ok, redirected, refused, broken] = status.slice(1, 5).map(Number) as [number, number, number, number];
  return { ok, failed: redirected + refused + broken + Number(requests[6]) };
}

/** `concurrency` requests in flight for `seconds` after 0.5 s of warm-up; latencies (unless `latencies: false`) from h2load's per-request log (microseconds to the end of each answer). */
export async function h2load(request: H2loadRequest, concurrency: number, seconds: number): Promise<LoadResult> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-h2load-'));
  try {
    const body = join(dir, 'request.bin');
    const log = join(dir, 'requests.tsv');
    await writeFile(body, request.body);
    const pipelined = request.http1 ? (request.pipelined ?? 1) : concurrency;
    if (!Number.isInteger(concurrency / pipelined))
      throw new Error(`${concurrency} in flight is not a whole number of connections of ${pipelined}`);
    const layout = [...(request.http1 ? ['--h1'] : []), '-c', String(concurrency / pipelined), '-m', String(pipelined)];
    const latencies = request.latencies ?? true;
    const args = [
      ...layout,
      ...['-t', '1', '-D', String(seconds), '--warm-up-time', '500ms', '-d', body, ...(latencies ? ['--log-file', log] : [])],
      ...Object.entries(request.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
      request.url,
    ];
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (c: Buffer) => (text += c.toString()));
      child.stderr.on('data', (c: Buffer) => (text += c.toString()));
      // Bounded: h2load stops itself after the warm-up and the duration; a hung one is killed.
      const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(text);
        else reject(new Error(`h2load exited with ${code}:\n${text.slice(-2000)}`));
      });
    });
    const { ok, failed } = counts(output);
    const lines = latencies ? (await readFile(log, 'utf8')).split('\n').filter(Boolean) : [];
    const micros = Float64Array.from(lines, (line) => Number(line.split('\t')[2]));
    micros.sort();
    return {
      concurrency,
      requests: ok,
      errors: failed,
      seconds,
      rps: ok / seconds,
      p50Ms: percentile(micros, 0.5) / 1000,
      p90Ms: percentile(micros, 0.9) / 1000,
      p99Ms: percentile(micros, 0.99) / 1000,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
