import { connect } from 'node:net';
import type { Socket } from 'node:net';

type Request = { url: string; method?: string; headers?: Record<string, string>; body?: Buffer | string };

const HEADER_END = Buffer.from('\r\n\r\n');

/** Where a chunked body that starts at `from` ends (past its last chunk's CRLF), or undefined until all of it came. */
function chunkedEnd(bytes: Buffer, from: number): number | undefined {
  let at = from;
  for (;;) {
    const line = bytes.indexOf('\r\n', at);
    if (line < 0) return undefined;
    const size = parseInt(bytes.toString('latin1', at, line), 16);
    if (size === 0) return bytes.length >= line + 4 ? line + 4 : undefined;
    at = line + 2 + size + 2;
    if (at > bytes.length) return undefined;
  }
}

/**
 * The leanest client a latency can be measured with: one kept-alive socket, the request's bytes
 * built once and written in one write, the answer read as bytes to its end (a Content-Length or chunks). At one
 * call in flight a client's own CPU is part of every latency it reports, and undici's parsing and
 * promise chain cost about as much as the server's overhead being measured (bench/RESULTS-first-deploy.md
 * prints both clients' figures for the same server), so the overhead over a raw `session.run` is
 * read with this one.
 */
export async function rawHttpCaller(request: Request): Promise<{ call: () => Promise<void>; close: () => void }> {
  const url = new URL(request.url);
  const body = typeof request.body === 'string' ? Buffer.from(request.body) : (request.body ?? Buffer.alloc(0));
  const headers = { host: url.host, 'content-length': String(body.length), ...request.headers };
  const head = `${request.method ?? 'POST'} ${url.pathname}${url.search} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  const bytes = Buffer.concat([Buffer.from(head, 'latin1'), body]);
  const socket: Socket = await new Promise((resolve, reject) => {
    const s = connect(Number(url.port), url.hostname, () => resolve(s)).once('error', reject);
  });
  socket.setNoDelay(true);
  let pending: { resolve: () => void; reject: (e: Error) => void } | undefined;
  let received: Buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    const end = received.indexOf(HEADER_END);
    if (end < 0 || !pending) return;
    const text = received.subarray(0, end).toString('latin1');
    const whole = /\r\ntransfer-encoding: *chunked/i.test(text)
      ? chunkedEnd(received, end + 4)
      : end + 4 + Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0);
    if (whole === undefined || received.length < whole) return;
    received = received.subarray(whole);
    const status = Number(text.slice(9, 12));
    const done = pending;
    pending = undefined;
    if (status >= 300) done.reject(new Error(`HTTP ${status}`));
    else done.resolve();
  });
  socket.on('error', (err) => pending?.reject(err));
  socket.on('close', () => pending?.reject(new Error('the server closed the connection')));
  return {
    call: () =>
      new Promise<void>((resolve, reject) => {
        pending = { resolve, reject };
        socket.write(bytes);
      }),
    close: () => void socket.destroy(),
  };
}
