import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { Agent, IncomingHttpHeaders } from 'node:http';
import { connect as netConnect } from 'node:net';

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

/** One HTTP request over a real socket (global fetch), bounded in time. */
export async function call(
  base: string,
  method: string,
  path: string,
  options: { body?: string | Uint8Array; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: options.headers ?? {},
    ...(options.body !== undefined ? { body: options.body } : {}),
    signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
  });
  const body = Buffer.from(await response.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, body, json };
}

/** An answer read by node:http: status, headers, body, and the body parsed as JSON where it is JSON. */
export interface NodeAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json: unknown;
  socket: unknown;
}

/**
 * One request with node:http, path sent exactly as given (fetch would normalise `..` away), on
 * `agent` (a kept-alive pool; false: a connection of its own, the default), bounded in time.
 */
export function nodeCall(
  base: string,
  method: string,
  path: string,
  options: { body?: string | Buffer; headers?: Record<string, string>; agent?: Agent | false; timeoutMs?: number } = {},
): Promise<NodeAnswer> {
  const url = new URL(base);
  const { body } = options;
  const length = body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent: options.agent ?? false,
        headers: { ...options.headers, ...length },
        timeout: options.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const bytes = Buffer.concat(chunks);
          let json: unknown;
          try {
            json = JSON.parse(bytes.toString('utf8'));
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: bytes, json, socket: res.socket });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A request whose path is sent exactly as given (fetch would normalise `..` away). */
export async function rawCall(base: string, method: string, path: string, body?: Buffer): Promise<{ status: number; json: unknown }> {
  const { status, json } = await nodeCall(base, method, path, body === undefined ? {} : { body });
  return { status, json };
}

/** Asserts an error answer: the status, a JSON body `{ error, code }` and a message naming the problem. */
export function assertError(answer: { status: number; json: unknown }, status: number, code: string, message: RegExp): void {
  const body = answer.json as { error?: unknown; code?: unknown } | undefined;
  assert.equal(answer.status, status, JSON.stringify(body));
  assert.equal(typeof body?.error, 'string', `a JSON error body, got ${JSON.stringify(body)}`);
  assert.equal(body?.code, code, String(body?.error));
  assert.match(body!.error as string, message);
}

/**
 * A binary-extension request body built by hand from the protocol text (not with the head's own
 * encoder): the JSON, then each tensor's bytes; the JSON's length goes in the header.
 */
export function binaryBody(header: unknown, parts: Uint8Array[]): { body: Buffer; headers: Record<string, string> } {
  const json = Buffer.from(JSON.stringify(header));
  return {
    body: Buffer.concat([json, ...parts]),
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(json.length) },
  };
}

/** Splits a binary response into its JSON and the bytes after it. */
export function splitBinaryAnswer(answer: HttpAnswer): {
  json: {
    outputs: { name: string; datatype: string; shape: number[]; parameters?: { binary_data_size?: number }; data?: unknown[] }[];
  } & Record<string, unknown>;
  binary: Buffer;
} {
  const length = Number(answer.headers.get('inference-header-content-length'));
  assert.ok(Number.isInteger(length) && length > 0, 'Inference-Header-Content-Length is set');
  return { json: JSON.parse(answer.body.subarray(0, length).toString('utf8')), binary: answer.body.subarray(length) };
}

/** One response read off a raw socket. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  json: unknown;
}

/**
 * Writes `bytes` as they are on a connection of its own (requests no HTTP client would send: a
 * body longer than its Content-Length, a malformed line, a huge header), ends its side, and reads
 * every response until the server closes, bounded in time. Responses are split by Content-Length.
 * A write the server cut short still resolves with what it answered.
 */
export function rawExchange(base: string, bytes: string | Buffer, timeoutMs = 15_000): Promise<RawResponse[]> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: hostname, port: Number(port) }, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error(`no close within ${timeoutMs} ms`)), timeoutMs);
    let failed: Error | undefined;
    socket.on('data', (c: Buffer) => chunks.push(c));
    // A server that answers before it read everything (413 to a body too large) and closes makes
    // the rest of the write fail (EPIPE, ECONNRESET): what it answered is the exchange's outcome.
    socket.on('error', (err) => (failed = err));
    socket.on('close', () => {
      clearTimeout(timer);
      if (chunks.length === 0 && failed) reject(failed);
      else resolve(parseResponses(Buffer.concat(chunks)));
    });
  });
}

function parseResponses(all: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  let at = 0;
  while (at < all.length) {
    const end = all.indexOf('\r\n\r\n', at);
    if (end < 0) throw new Error(`a truncated response head: ${all.subarray(at).toString('latin1').slice(0, 200)}`);
    const [line, ...fields] = all.subarray(at, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(line ?? '')?.[1]);
    const headers: Record<string, string> = {};
    for (const field of fields) {
      const colon = field.indexOf(':');
      headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const body = all.subarray(end + 4, end + 4 + length);
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      json = undefined;
    }
    responses.push({ status, headers, body, json });
    at = end + 4 + length;
  }
  return responses;
}
