import { WebSocket } from 'ws';
import { z } from 'zod';
import { Channel, clientSocketOptions, HeadToClientSchema, RoutesSchema } from '../../runtime/internal.js';
import type { ClientToHead, HeadToClient, Routes } from '../../runtime/internal.js';
import { processUsage } from '../../node-agent/proc-stats.js';
import { cpuMs } from '../lib/process-cpu.js';

const ClientReplies = { hello: z.unknown(), routes: RoutesSchema };

/**
 * An SDK client's connection that holds routes for one deployment, as the SDK's router does
 * (a `routes` request, then the pushes that follow), counting every byte the head sends it.
 */
export class RouteWatcher {
  readonly #ws: WebSocket;
  readonly #channel: Channel<HeadToClient, ClientToHead, typeof ClientReplies>;
  bytes = 0;
  pushes = 0;
  /** The routes as this client knows them now: the answer to its request, then each push. */
  routes: Routes | undefined;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data: Buffer) => (this.bytes += data.byteLength));
    this.#channel = new Channel<HeadToClient, ClientToHead, typeof ClientReplies>(ws, {
      schema: HeadToClientSchema,
      replies: ClientReplies,
      onMessage: (message) => {
        if (message.type !== 'routes') return;
        this.pushes++;
        this.routes = message.routes;
      },
    });
  }

  static async open(headUrl: string, deployment: string): Promise<RouteWatcher> {
    const ws = new WebSocket(new URL('/v1/client', headUrl), { ...clientSocketOptions({}), handshakeTimeout: 30_000 });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const watcher = new RouteWatcher(ws);
    await watcher.#channel.request({ type: 'hello' }, 30_000);
    const routes = await watcher.#channel.request({ type: 'routes', deployment }, 30_000);
    // A push that overtook the answer is newer than it.
    watcher.routes ??= routes;
    return watcher;
  }

  close(): void {
    this.#ws.terminate();
  }
}

/** The status page's first load, as a browser fetches it: the page, every asset it and its modules name, and the first snapshot. */
export async function statusFirstLoadBytes(baseUrl: string, stream: StatusStreamMeter): Promise<number> {
  const seen = new Set<string>();
  let bytes = 0;
  const fetchAll = async (path: string): Promise<void> => {
    if (seen.has(path)) return;
    seen.add(path);
    const res = await fetch(new URL(path, baseUrl));
    const body = Buffer.from(await res.arrayBuffer());
    bytes += body.byteLength;
    if (!/\.(js|html)$|\/$/.test(path)) return;
    const text = body.toString('utf8');
    const named = [
      // Attributes, and the import map's entries (uPlot and dagre, which the modules import by bare name).
      ...[...text.matchAll(/"(\/status\/assets\/[^"]+)"/g)].map((m) => m[1]!),
      // ES module imports, relative to the importing file.
      ...[...text.matchAll(/(?:from|import)\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => new URL(m[1]!, new URL(path, baseUrl)).pathname),
    ];
    await Promise.all(named.map(fetchAll));
  };
  await fetchAll('/');
  await fetchAll('/status/session');
  return bytes + (await stream.firstEvent);
}

/** Reads the status page's live feed (/api/v1/stream) and counts its bytes. */
export class StatusStreamMeter {
  readonly #abort = new AbortController();
  bytes = 0;
  /** The head closed the stream (or it failed) after its first event. */
  ended = false;
  /** Bytes up to and including the first event, once it has arrived. */
  readonly firstEvent: Promise<number>;

  constructor(baseUrl: string) {
    this.firstEvent = fetch(new URL('/api/v1/stream', baseUrl), { signal: this.#abort.signal }).then(async (res) => {
      const reader = res.body!.getReader();
      let text = '';
      let first: number | undefined;
      return new Promise<number>((resolve, reject) => {
        const pump = (): void => {
          reader.read().then(
            ({ done, value }) => {
              if (done) {
                this.ended = true;
                return first === undefined ? reject(new Error('the status stream ended before its first event')) : undefined;
              }
              this.bytes += value.byteLength;
              if (first === undefined) {
                text += Buffer.from(value).toString('utf8');
                if (text.includes('\n\n')) resolve((first = this.bytes));
              }
              pump();
            },
            (err: unknown) => {
              this.ended = true;
              if (first === undefined) reject(err as Error);
            },
          );
        };
        pump();
      });
    });
    this.firstEvent.catch(() => {});
  }

  close(): void {
    this.#abort.abort();
  }
}

/** The head process's memory and CPU, sampled while something runs: peak RSS, and CPU as % of one core. */
export async function watchHead<T>(
  pid: number,
  work: () => Promise<T>,
): Promise<{ result: T; peakRssMb: number; cpuPct: number; ms: number }> {
  let peak = 0;
  const sample = async () => {
    const usage = await processUsage(pid);
    if (usage) peak = Math.max(peak, usage.rssBytes / 2 ** 20);
  };
  await sample();
  const timer = setInterval(() => void sample(), 250);
  const cpu0 = cpuMs(pid);
  const t0 = performance.now();
  try {
    const result = await work();
    await sample();
    const ms = performance.now() - t0;
    return { result, peakRssMb: peak, cpuPct: ((cpuMs(pid) - cpu0) / ms) * 100, ms };
  } finally {
    clearInterval(timer);
  }
}
