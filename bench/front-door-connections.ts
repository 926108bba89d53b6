// The MLP over HTTP with more requests in flight, as more connections or as more requests
// pipelined on each: one replica serving HTTP (--http-handoff) beside the simplest Node HTTP
// server, in alternating windows, loaded by h2load without its per-request log (the figures are
// throughput only). A part of `npm run bench:front-door` (front-door.ts).
import { baselineServer } from './lib/baseline-server.js';
import { whenDoorsOpen } from './lib/doors.js';
import { h2load, h2loadAvailable } from './lib/h2load.js';
import type { H2loadRequest } from './lib/h2load.js';
import { oipRequest } from './lib/http-load.js';
import { median } from './lib/report.js';
import { fmt } from './lib/table.js';

const WINDOWS = 3;
/** Requests in flight, and how many of them share each connection. */
const LAYOUTS = [
  { inFlight: 16, pipelined: 1 },
  { inFlight: 64, pipelined: 1 },
  { inFlight: 256, pipelined: 1 },
  { inFlight: 256, pipelined: 4 },
] as const;

export interface ConnectionsOptions {
  /** A cluster started with --http-handoff, its MLP deployed as one replica whose door is to be waited for. */
  handoffUrl: string;
  mlpPath: string;
  mlpX: Float32Array;
  seconds: number;
  say: (text: string) => void;
}

export async function connectionsSection({ handoffUrl, mlpPath, mlpX, seconds, say }: ConnectionsOptions): Promise<void> {
  say('\n### More in flight: more connections, or more requests on each\n');
  if (!h2loadAvailable()) return say('Skipped: h2load is not installed (`apt-get install -y nghttp2-client`).');
  const oip = oipRequest(`${handoffUrl}/v2/models/mlp/infer`, 'x', [1, 64], mlpX, 'logits', true);
  await whenDoorsOpen(handoffUrl, 'mlp', 1, oip);
  const troupe: H2loadRequest = { url: oip.url, body: Buffer.from(oip.body), headers: oip.headers, http1: true, latencies: false };
  const plain = await baselineServer(mlpPath, 'plain-http-server');
  const rps = new Map<string, number[]>();
  const measure = async (key: string, request: H2loadRequest, inFlight: number, pipelined: number) => {
    const r = await h2load({ ...request, pipelined }, inFlight, seconds);
    if (r.errors > 0) throw new Error(`${key}: ${r.errors} requests failed`);
    rps.set(key, [...(rps.get(key) ?? []), r.rps]);
  };
  try {
    const simplest: H2loadRequest = { url: plain.url, body: Buffer.from(mlpX.buffer), headers: {}, http1: true, latencies: false };
    for (let w = 0; w < WINDOWS; w++)
      for (const { inFlight, pipelined } of LAYOUTS) {
        await measure(`troupe ${inFlight}x${pipelined}`, troupe, inFlight, pipelined);
        await measure(`simplest ${inFlight}x${pipelined}`, simplest, inFlight, pipelined);
      }
  } finally {
    plain.stop();
  }
  say(
    `HTTP/1.1, req/s, median of ${WINDOWS} alternating windows of ${seconds} s; load: h2load --h1 without its per-request log. One replica serving HTTP (--http-handoff), batching maxSize 64, beside the simplest Node HTTP server around an in-process session (raw body, batch 1):\n`,
  );
  say('| in flight | connections x requests on each | Troupe, 1 replica | simplest server | Troupe vs simplest |');
  say('| ---: | ---: | ---: | ---: | ---: |');
  for (const { inFlight, pipelined } of LAYOUTS) {
    const t = median(rps.get(`troupe ${inFlight}x${pipelined}`)!);
    const s = median(rps.get(`simplest ${inFlight}x${pipelined}`)!);
    say(`| ${inFlight} | ${inFlight / pipelined} x ${pipelined} | ${fmt(t)} | ${fmt(s)} | ${fmt(t / s, 2)}x |`);
  }
}
