import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { percentile } from './load.js';
import type { LoadResult } from './load.js';

/**
 * gRPC load from h2load (Debian's nghttp2-client: `apt-get install -y nghttp2-client`), a C load
 * generator that sends one pre-encoded ModelInfer message again and again, `concurrency` streams
 * in flight on one HTTP/2 connection (as a gRPC channel multiplexes its calls), so the figure
 * measures the server and not a JavaScript client's encoding. h2load knows HTTP, not gRPC: it
 * cannot see grpc-status (a trailer), so `verifyGrpcAnswers` checks a sample of answers to the
 * same bytes first, over Node's own HTTP/2 client.
 */

export const SERVICE_PATH = '/inference.GRPCInferenceService/ModelInfer';

/** Whether h2load is installed (else the bench falls back to the grpc-js client). */
export function h2loadAvailable(): boolean {
  return spawnSync('h2load', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A protobuf message in gRPC's length-prefixed framing: uncompressed flag, 4-byte big-endian length, the bytes. */
export function grpcFrame(message: Buffer): Buffer {
  const framed = Buffer.alloc(5 + message.length);
  framed.writeUInt32BE(message.length, 1);
  message.copy(framed, 5);
  return framed;
}

/** Sends `framed` `sample` times and hands each answer's message bytes to `check`; throws unless every one is grpc-status 0. */
export async function verifyGrpcAnswers(address: string, framed: Buffer, check: (message: Buffer) => void, sample = 20): Promise<void> {
  const session = connect(`http://${address}`);
  try {
    for (let i = 0; i < sample; i++) {
      const { body, status, message } = await new Promise<{ body: Buffer; status: string | undefined; message: string | undefined }>(
        (resolve, reject) => {
          const stream = session.request({ ':method': 'POST', ':path': SERVICE_PATH, 'content-type': 'application/grpc', te: 'trailers' });
          const chunks: Buffer[] = [];
          let trailers: Record<string, unknown> = {};
          stream.on('trailers', (t) => (trailers = t));
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () =>
            resolve({
              body: Buffer.concat(chunks),
              status: trailers['grpc-status'] as string | undefined,
              message: trailers['grpc-message'] as string | undefined,
            }),
          );
          stream.end(framed);
        },
      );
      if (status !== '0') throw new Error(`h2load's request is answered grpc-status ${status}: ${decodeURIComponent(message ?? '')}`);
      if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5)
        throw new Error(`an answer of ${body.length} bytes is not one gRPC message`);
      check(body.subarray(5));
    }
  } finally {
    session.close();
  }
}

/** h2load's summary line `requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout`. */
function counts(output: string): { succeeded: number; failed: number } {
  const m = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(output);
  if (!m) throw new Error(`h2load printed no summary:\n${output.slice(-2000)}`);
  return { succeeded: Number(m[4]), failed: Number(m[5]) + Number(m[6]) + Number(m[7]) };
}

/** Closed-loop gRPC load with h2load; latencies from its per-request log (microseconds to the end of each answer). */
export async function h2loadGrpc(address: string, framed: Buffer, concurrency: number, seconds: number): Promise<LoadResult> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-h2load-'));
  try {
    const body = join(dir, 'request.bin');
    const log = join(dir, 'requests.tsv');
    await writeFile(body, framed);
    const args = [
      ...['-c', '1', '-m', String(concurrency), '-t', '1'],
      ...['-D', String(seconds), '--warm-up-time', '500ms'],
      ...['-d', body, '-H', 'content-type: application/grpc', '-H', 'te: trailers', '--log-file', log],
      `http://${address}${SERVICE_PATH}`,
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
    const { succeeded, failed } = counts(output);
    const lines = (await readFile(log, 'utf8')).split('\n').filter(Boolean);
    const micros = Float64Array.from(lines, (line) => Number(line.split('\t')[2]));
    micros.sort();
    return {
      concurrency,
      requests: succeeded,
      errors: failed,
      seconds,
      rps: succeeded / seconds,
      p50Ms: percentile(micros, 0.5) / 1000,
      p90Ms: percentile(micros, 0.9) / 1000,
      p99Ms: percentile(micros, 0.99) / 1000,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
