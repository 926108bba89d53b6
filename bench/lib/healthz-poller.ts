import { connect as netConnect } from 'node:net';
import { setPriority } from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

/** One GET /healthz on a connection of its own: its latency in ms, or undefined if refused or unanswered in 10 s. */
function healthz(host: string, port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = netConnect(port, host);
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const bound = setTimeout(() => socket.destroy(), 10_000);
    socket.once('close', () => {
      clearTimeout(bound);
      resolve(text.startsWith('HTTP/1.1 200 ') ? performance.now() - started : undefined);
    });
  });
}

/** Back to nice 0, where this process may lower its nice value again (root, or CAP_SYS_NICE); else it stays. */
function restorePriority(): void {
  try {
    setPriority(0);
  } catch {
    // Unprivileged: the attacker's thread stays at the lower priority, which only slows the bench's own setup.
  }
}

export interface Polled {
  ms: number[];
  failed: number;
}

/**
 * Polls /healthz at each of `urls` (the head's main port, its probe port) every 20 ms until `work`
 * settles, one figure per URL. Each poller runs on a thread of its own: an attack that writes tens
 * of megabytes from this thread blocks its event loop, and a poller sharing it would time the
 * attacker's writes as the head's latency.
 */
export async function polledDuring(urls: readonly string[], work: () => Promise<unknown>, attackerNice = 0): Promise<Polled[]> {
  const pollers = urls.map((url) => {
    const { hostname, port } = new URL(url);
    const poller = new Worker(new URL(import.meta.url), { workerData: { hostname, port: Number(port) } });
    const started = new Promise((resolve) => poller.once('message', resolve));
    const polled = new Promise<Polled>((resolve, reject) => {
      poller.once('error', reject);
      poller.on('message', (m: Polled | 'polling') => m !== 'polling' && resolve(m));
    });
    return { poller, started, polled };
  });
  await Promise.all(pollers.map((p) => p.started));
  // Linux sets a nice value per thread: the pollers, started before, keep their own.
  if (attackerNice !== 0) setPriority(attackerNice);
  try {
    await work();
  } finally {
    for (const { poller } of pollers) poller.postMessage('stop');
    if (attackerNice !== 0) restorePriority();
  }
  const results = await Promise.all(pollers.map((p) => p.polled));
  await Promise.all(pollers.map((p) => p.poller.terminate()));
  return results;
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  const { hostname, port: tcpPort } = workerData as { hostname: string; port: number };
  let running = true;
  port.on('message', () => (running = false));
  port.postMessage('polling');
  const ms: number[] = [];
  let failed = 0;
  while (running) {
    const t = await healthz(hostname, tcpPort);
    if (t === undefined) failed++;
    else ms.push(t);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  port.postMessage({ ms, failed } satisfies Polled);
}
