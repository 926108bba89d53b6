import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startHead } from '../../head/index.js';
import type { Head } from '../../head/index.js';

let dir: string;
let head: Head;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-drain-'));
  head = await startHead({ port: 0, dataDir: dir, drainMs: 300 });
});
after(async () => {
  await head?.close();
  await rm(dir, { recursive: true, force: true });
});

/** An HTTP request whose response is read whole; `opened` resolves once the request is sent. */
function send(
  method: string,
  path: string,
  body?: string,
): { opened: Promise<void>; done: Promise<{ status: number; headers: Record<string, unknown>; body: string }> } {
  let opened!: () => void;
  const sent = new Promise<void>((resolve) => (opened = resolve));
  const done = new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
    const req = request(`${head.url}${path}`, { method, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body, () => opened());
  });
  return { opened: sent, done };
}

test('a draining head refuses new HTTP work with 503 SHUTTING_DOWN, answers what it accepted, and closes in bounded time', async () => {
  // Accepted and still open when the drain starts: a deploy that waits for READY (no node will come),
  // and a status-page event stream that never ends by itself.
  const deploy = send('PUT', '/api/v1/deployments/waits', '{"model": "mlp.onnx"}');
  await deploy.opened;
  const stream = send('GET', '/api/v1/stream');
  await stream.opened;
  await new Promise((r) => setTimeout(r, 100));

  const closing = head.close();
  const refused = await send('POST', '/v2/models/waits/infer', '{"inputs": []}').done;
  assert.equal(refused.status, 503);
  assert.equal(JSON.parse(refused.body).code, 'TROUPE_ERR_SHUTTING_DOWN');
  assert.equal(refused.headers['retry-after'], '1');
  // The deploy could never finish: after the drain period it is answered with the retryable code.
  const waited = await deploy.done;
  assert.equal(waited.status, 503, waited.body);
  assert.equal(JSON.parse(waited.body).code, 'TROUPE_ERR_SHUTTING_DOWN');
  await closing;
  await stream.done.catch(() => undefined);
});
