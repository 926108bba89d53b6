// What receiving a request costs a Node process before any model runs, by protocol stack: Node's
// HTTP/1.1 server, Node's HTTP/2 (the stack gRPC rides on), and @grpc/grpc-js over it, each in a
// process of its own answering every request at once (bench/baselines/receive-servers.ts). The
// bodies are the benches' own: the MLP's (a 64-float row, 64 in flight) and MobileNet's (588 KiB,
// 16 in flight). Loaded by h2load; the CPU is the servers' process's, from /proc. A part of
// `npm run bench:front-door` (front-door.ts): it bounds what gRPC can reach on two cores.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { h2load, h2loadAvailable } from './lib/h2load.js';
import type { H2loadRequest } from './lib/h2load.js';
import { grpcFrame } from './lib/h2load-grpc.js';
import { cpuMs } from './lib/process-cpu.js';
import { fmt } from './lib/table.js';

const WARMUP_SECONDS = 0.5;
const RECEIVE_PATH = '/bench.Receive/Infer';

interface Stack {
  name: string;
  port: number;
  http1: boolean;
}

/** Requests a second and the servers' CPU microseconds a request, `body` sent `inFlight` at a time. */
async function measure(pid: number, stack: Stack, body: Buffer, inFlight: number, seconds: number) {
  const request: H2loadRequest = {
    url: `http://127.0.0.1:${stack.port}${RECEIVE_PATH}`,
    body: stack.http1 ? body : grpcFrame(body),
    headers: stack.http1 ? { 'content-type': 'application/octet-stream' } : { 'content-type': 'application/grpc', te: 'trailers' },
    http1: stack.http1,
    latencies: false,
  };
  const before = cpuMs(pid);
  const r = await h2load(request, inFlight, seconds);
  const used = cpuMs(pid) - before;
  if (r.errors > 0 || r.requests === 0) throw new Error(`${stack.name}: ${r.errors} of ${r.requests + r.errors} requests failed`);
  // The CPU covers h2load's warm-up too: its requests are counted at the measured rate.
  return { rps: r.rps, cpuUs: (used * 1000) / (r.rps * (seconds + WARMUP_SECONDS)) };
}

export async function receiveCostSection(
  mlpX: Float32Array,
  image: Float32Array,
  seconds: number,
  say: (text: string) => void,
): Promise<void> {
  say('\n## What receiving a request costs a Node process, by protocol stack\n');
  if (!h2loadAvailable()) return say('Skipped: h2load is not installed (`apt-get install -y nghttp2-client`).');
  const script = fileURLToPath(new URL('./baselines/receive-servers.js', import.meta.url));
  const child = spawn(process.execPath, [script, RECEIVE_PATH], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [line] = (await Promise.race([
      once(createInterface({ input: child.stdout }), 'line'),
      once(child, 'exit').then(() => Promise.reject(new Error('receive-servers exited before it listened'))),
    ])) as [string];
    const [http1, http2, grpc] = line.split(' ').slice(1).map(Number) as [number, number, number];
    say(
      `Each server answers every request at once with 64 bytes, no model and no decoding, in a process of its own; load: h2load (HTTP/1.1: a connection for each request in flight; HTTP/2: every stream on one connection, as a gRPC channel), ${seconds} s; CPU: the server's process, µs a request (its warm-up's CPU included, about a sixth more):\n`,
    );
    say(
      '| server | MLP row (256 B), 64 in flight: req/s | CPU µs/request | MobileNet image (588 KiB), 16 in flight: req/s | CPU µs/image |',
    );
    say('| --- | ---: | ---: | ---: | ---: |');
    const row = Buffer.from(mlpX.buffer, mlpX.byteOffset, mlpX.byteLength);
    const picture = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
    for (const stack of [
      { name: "Node's HTTP/1.1 server (node:http)", port: http1, http1: true },
      { name: "Node's HTTP/2 server (node:http2), gRPC's framing", port: http2, http1: false },
      { name: 'gRPC on @grpc/grpc-js, unary, no decoding', port: grpc, http1: false },
    ]) {
      const small = await measure(child.pid!, stack, row, 64, seconds);
      const large = await measure(child.pid!, stack, picture, 16, seconds);
      say(`| ${stack.name} | ${fmt(small.rps)} | ${fmt(small.cpuUs, 1)} | ${fmt(large.rps)} | ${fmt(large.cpuUs)} |`);
    }
  } finally {
    child.kill('SIGTERM');
  }
}
