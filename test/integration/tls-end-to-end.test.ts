import { credentials } from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { connect, tensor } from '../../runtime/internal.js';
import type { Cluster, Routes, Tensor } from '../../runtime/internal.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import { routesOf } from '../helpers/routes.js';
import { childEnv } from '../helpers/env.js';
import { freePort } from '../helpers/free-port.js';
import { GRAPH_AGENT } from '../helpers/graphs.js';
import type { TestCluster } from '../helpers/cluster.js';
import { floatsOfRaw, grpcClient, rawFloats } from '../helpers/grpc-client.js';
import { splitBinaryAnswer } from '../helpers/http.js';
import { captureLoopback } from '../helpers/loopback-capture.js';
import { assertClose, floatsOf, mlpBinaryRequest } from '../helpers/mlp-oip.js';
import { runInProcess, seededFloats } from '../helpers/tensors.js';
import { makeTestPki } from '../helpers/tls-certs.js';
import type { TestPki } from '../helpers/tls-certs.js';

const CLI = fileURLToPath(new URL('../../cli/main.js', import.meta.url));

/** What a plaintext peer gets back from a port: the bytes the server wrote before the connection closed. */
function plaintextAnswer(port: number, bytes: string | Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: '127.0.0.1', port }, () => socket.write(bytes));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error(`port ${port} kept a plaintext connection open for 15 s`)), 15_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => {
      clearTimeout(timer);
      // A reset is a refusal too.
      if ((err as NodeJS.ErrnoException).code === 'ECONNRESET') resolve(Buffer.concat(chunks));
      else reject(err);
    });
    socket.on('close', () => (clearTimeout(timer), resolve(Buffer.concat(chunks))));
  });
}

/** Nothing served in clear: the connection closed with nothing, or with a TLS alert record (content type 21). */
function assertRefusedPlaintext(answer: Buffer, what: string): void {
  assert.ok(
    answer.length === 0 || answer[0] === 0x15,
    `${what} answered plaintext with ${JSON.stringify(answer.subarray(0, 40).toString('latin1'))}`,
  );
}

/** A float32 tensor's bytes. */
function bytesOf(t: Tensor): Buffer {
  const data = t.data as Float32Array;
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * The cluster's own TLS (`troupe head --tls-cert/--tls-key/--tls-agent-ca`, `troupe agent
 * --tls-ca/--tls-cert/--tls-key`, the SDK's `tls`), with a CA, server and client certificates
 * this test makes with openssl: every port refuses plaintext, an agent needs a certificate the
 * CA signed, and while the SDK runs directly and through the head, HTTPS and gRPC call the model,
 * tcpdump on loopback sees no byte of the tensors and not the token.
 */
describe('TLS of its own, end to end', { timeout: 180_000 }, () => {
  const TOKEN = `tls-e2e-token-${randomBytes(12).toString('hex')}`;
  let pki: TestPki;
  let cluster: TestCluster;
  let client: Cluster;
  let routes: Routes;
  /** The head's --probe-port: the same TLS as its main port. */
  let probePort: number;

  /** The head's routes for `deployment`, asked over WSS as a client would. */
  const routesOver = (deployment: string): Promise<Routes> =>
    routesOf(cluster.url, deployment, { ca: pki.ca, headers: { authorization: `Bearer ${TOKEN}` } });

  /** One request to the head over HTTPS, trusting the test CA, with the token. */
  const httpsCall = (method: string, path: string, body: Buffer, headers: Record<string, string>) =>
    new Promise<{ status: number; headers: Record<string, string>; body: Buffer }>((resolve, reject) => {
      const req = httpsRequest(
        `${cluster.url}${path}`,
        { method, ca: pki.ca, headers: { ...headers, authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(60_000) },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body: Buffer.concat(chunks) }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  before(async () => {
    pki = await makeTestPki();
    probePort = await freePort();
    cluster = await startCluster({
      headArgs: [
        ...['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-agent-ca', pki.caCert, '--token', TOKEN],
        ...['--probe-port', String(probePort)],
      ],
      agents: [['--tls-ca', pki.caCert, '--tls-cert', pki.clientCert, '--tls-key', pki.clientKey, '--token', TOKEN, ...GRAPH_AGENT]],
    });
    // Small tensors, and no shared memory: every byte of a run crosses a socket, where the capture looks.
    client = await connect(cluster.url, { token: TOKEN, tls: { ca: pki.ca }, sharedMemory: false });
    await client.deploy({ name: 'mlp', model: 'mlp.onnx', threads: 1 });
    routes = await routesOver('mlp');
  });
  after(async () => {
    await client?.close();
    await cluster?.stop();
    if (pki) await rm(pki.dir, { recursive: true, force: true });
  });

  test('TLS flags that cannot be used stop the head or agent at start, naming the flag and never the key', async () => {
    const notPem = join(pki.dir, 'not-pem.txt');
    await writeFile(notPem, 'not a certificate\n');
    const dataDir = ['--data-dir', join(pki.dir, 'head-flags')];
    const head = (...args: string[]) => ['head', '--port', '0', '--no-grpc', ...dataDir, ...args];
    const cases: [string[], string, RegExp][] = [
      [head('--tls-cert', pki.serverCert), 'TROUPE_ERR_BAD_FLAG', /--tls-cert and --tls-key go together/],
      [head('--tls-agent-ca', pki.caCert), 'TROUPE_ERR_BAD_FLAG', /--tls-agent-ca needs --tls-cert and --tls-key/],
      [
        head('--tls-cert', join(pki.dir, 'missing.pem'), '--tls-key', pki.serverKey),
        'TROUPE_ERR_BAD_TLS',
        /--tls-cert: cannot read .*missing\.pem: ENOENT/,
      ],
      [head('--tls-cert', pki.serverCert, '--tls-key', notPem), 'TROUPE_ERR_BAD_TLS', /--tls-key: .*not-pem\.txt holds no PEM block/],
      [
        head('--tls-cert', pki.serverCert, '--tls-key', pki.clientKey),
        'TROUPE_ERR_BAD_TLS',
        /--tls-cert\/--tls-key: .*key values mismatch/,
      ],
      [
        head('--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--http-workers', '2'),
        'TROUPE_ERR_BAD_FLAG',
        /--http-workers cannot be above 0 with TLS/,
      ],
      [
        head('--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--http-handoff'),
        'TROUPE_ERR_BAD_FLAG',
        /--http-handoff cannot be used with TLS/,
      ],
      [
        ['agent', '--head', 'ws://127.0.0.1:1', '--tls-ca', pki.caCert],
        'TROUPE_ERR_BAD_FLAG',
        /--tls-ca, --tls-cert and --tls-key need a wss:\/\/ or https:\/\/ --head/,
      ],
      [
        ['agent', '--head', 'wss://127.0.0.1:1', '--tls-ca', pki.caCert, '--tls-cert', pki.clientCert],
        'TROUPE_ERR_BAD_FLAG',
        /--tls-cert and --tls-key go together/,
      ],
    ];
    for (const [args, code, message] of cases) {
      const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 20_000, env: childEnv() });
      assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, new RegExp(`${code}: .*`), args.join(' '));
      assert.match(out.stderr, message, args.join(' '));
      assert.doesNotMatch(out.stderr, /PRIVATE KEY|BEGIN/, 'no PEM text in the error');
    }
  });

  test('the head says https, and its replicas take direct calls on tls:// ports', () => {
    assert.match(cluster.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(routes.replicas.length, 1);
    assert.match(routes.replicas[0]!.url, /^tls:\/\/127\.0\.0\.1:\d+$/);
  });

  test('HTTP, WebSocket upgrades, gRPC, the probe port and the direct port each refuse plaintext', async () => {
    const headPort = Number(new URL(cluster.url).port);
    const grpcPort = Number(cluster.grpcAddress.split(':').pop());
    const directPort = Number(new URL(routes.replicas[0]!.url).port);
    assertRefusedPlaintext(await plaintextAnswer(headPort, 'GET /v2/health/ready HTTP/1.1\r\nhost: x\r\n\r\n'), 'HTTP');
    const upgrade = (path: string, to: string) =>
      `GET ${path} HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: ${to}\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
    assertRefusedPlaintext(await plaintextAnswer(headPort, upgrade('/v1/agent', 'websocket')), 'the agent endpoint');
    assertRefusedPlaintext(await plaintextAnswer(headPort, upgrade('/v1/client', 'troupe-frames')), 'the client endpoint');
    assertRefusedPlaintext(await plaintextAnswer(grpcPort, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), 'gRPC');
    assertRefusedPlaintext(await plaintextAnswer(probePort, 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n'), 'the probe port');
    // Over TLS, trusting the test CA, it answers as the main port does.
    const live = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(`https://127.0.0.1:${probePort}/healthz`, { ca: pki.ca, signal: AbortSignal.timeout(30_000) }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.deepEqual([live.status, JSON.parse(live.body)], [200, { status: 'ok' }]);
    // A direct port's first frame would be a hello: a length prefix and msgpack.
    assertRefusedPlaintext(await plaintextAnswer(directPort, Buffer.from([0, 0, 0, 4, 0x81, 0xa1, 0x61, 0x01])), 'the direct port');

    const plainGrpc = grpcClient(cluster.grpcAddress);
    try {
      await assert.rejects(plainGrpc.call('ServerLive', {}, { deadlineMs: 10_000 }), 'a plaintext gRPC client gets no answer');
    } finally {
      plainGrpc.close();
    }
  });

  test('the SDK never falls back to plaintext: an http: URL and an unknown CA are refused', async () => {
    await assert.rejects(connect(cluster.url.replace('https:', 'http:'), { token: TOKEN, reconnect: false, connectTimeoutMs: 5000 }), {
      code: 'TROUPE_ERR_CONNECTION_CLOSED',
    });
    // Node's roots do not hold the test CA, and another CA is not the one that signed the head's certificate.
    for (const tls of [undefined, { ca: await readFile(pki.otherCaCert) }])
      await assert.rejects(
        connect(cluster.url, { token: TOKEN, reconnect: false, connectTimeoutMs: 5000, ...(tls ? { tls } : {}) }),
        (err: Error) => {
          assert.equal((err as { code?: string }).code, 'TROUPE_ERR_CONNECTION_CLOSED');
          assert.match(err.message, /certificate/);
          return true;
        },
      );
  });

  test('a model uploaded over HTTPS reaches the agent over TLS (with its client certificate), and serves', async () => {
    const mlp = await readFile(cluster.models.mlp);
    const put = await httpsCall('PUT', '/api/v1/models/mlp-up', mlp, { 'content-type': 'application/octet-stream' });
    assert.equal(put.status, 201, put.body.toString());
    const { sha256 } = JSON.parse(put.body.toString()) as { sha256: string };
    const view = await client.deploy({ name: 'mlp-up', model: `head:mlp-up@sha256:${sha256}`, threads: 1 });
    assert.equal(view.state, 'READY');
    const x = tensor('float32', [2, 64], seededFloats(128, 7));
    const want = await runInProcess(cluster.models.mlp, { x });
    assertClose((await client.run('mlp-up', { x })).logits!.data as Float32Array, want.logits!.data as Float32Array, 'uploaded');
    await client.undeploy('mlp-up');
  });

  test("a client made inside a class actor reaches the head over TLS with its agent's CA, and nothing else to pass", async () => {
    // The fixture connects to TROUPE_HEAD_URL (wss:) without a token: the head answers, over TLS,
    // that a method call needs the token, where a failed handshake would have been CONNECTION_CLOSED.
    const caller = await client.actor({
      name: 'caller',
      module: 'test/fixtures/ray-parity.js',
      export: 'SelfCaller',
      cpus: 0.1,
      maxConcurrency: 2,
    });
    const answer = await caller.call<{ code?: string; message?: string }>('callSelf');
    assert.equal(answer.code, 'TROUPE_ERR_UNAUTHORIZED', answer.message);
    await client.undeploy('caller');
  });

  test('an agent refuses a head it cannot verify, and one given a ws:// URL is refused: neither joins', () => {
    const agent = (head: string, ca: string) =>
      spawnSync(
        process.execPath,
        [
          CLI,
          'agent',
          '--head',
          head,
          '--tls-ca',
          ca,
          '--token',
          TOKEN,
          '--model-dir',
          pki.dir,
          '--state-dir',
          join(pki.dir, 'agent-state'),
        ],
        { encoding: 'utf8', timeout: 30_000, env: childEnv() },
      );
    const untrusted = agent(cluster.url.replace('https:', 'wss:'), pki.otherCaCert);
    assert.equal(untrusted.status, 1, untrusted.stderr);
    assert.match(untrusted.stderr, /TROUPE_ERR_CONNECTION_CLOSED: cannot reach the head at wss:.*certificate/);
    const plain = spawnSync(
      process.execPath,
      [
        CLI,
        'agent',
        '--head',
        cluster.url.replace('https:', 'ws:'),
        '--token',
        TOKEN,
        '--model-dir',
        pki.dir,
        '--state-dir',
        join(pki.dir, 'agent-state'),
      ],
      { encoding: 'utf8', timeout: 30_000, env: childEnv() },
    );
    assert.equal(plain.status, 1, plain.stderr);
    assert.match(plain.stderr, /TROUPE_ERR_CONNECTION_CLOSED: cannot reach the head at ws:/);
  });

  test('an agent must present a certificate the agent CA signed', async () => {
    const agentSocket = async (cert?: { cert: Buffer; key: Buffer }): Promise<number> => {
      const ws = new WebSocket(new URL('/v1/agent', cluster.url.replace('https', 'wss')), {
        ca: pki.ca,
        headers: { authorization: `Bearer ${TOKEN}` },
        ...(cert ?? {}),
      });
      return new Promise((resolve, reject) => {
        ws.once('open', () => (ws.close(), resolve(101)));
        ws.once('unexpected-response', (_req, res) => (ws.terminate(), resolve(res.statusCode ?? 0)));
        ws.once('error', reject);
      });
    };
    assert.equal(await agentSocket(), 401, 'no certificate');
    assert.equal(
      await agentSocket({ cert: await readFile(pki.otherClientCert), key: await readFile(pki.otherClientKey) }),
      401,
      'a certificate another CA signed',
    );
    assert.equal(
      await agentSocket({ cert: await readFile(pki.clientCert), key: await readFile(pki.clientKey) }),
      101,
      'the agent CA signed it',
    );
  });

  test('direct runs, runs through the head, HTTPS and gRPC are right, and loopback carries no tensor byte and no token', async (t) => {
    const headPort = Number(new URL(cluster.url).port);
    const grpcPort = Number(cluster.grpcAddress.split(':').pop());
    const directPort = Number(new URL(routes.replicas[0]!.url).port);
    let capture;
    try {
      capture = await captureLoopback([headPort, grpcPort, directPort]);
    } catch (err) {
      t.diagnostic(`SKIPPED LOUDLY: ${(err as Error).message} (install tcpdump and run as root: .ci/run does)`);
      t.skip((err as Error).message);
      return;
    }
    // 64 floats from a seed of this test: 256 bytes no other traffic holds.
    const x = tensor('float32', [1, 64], seededFloats(64, 40_4040));
    const want = await runInProcess(cluster.models.mlp, { x });
    const wantLogits = want.logits!.data as Float32Array;

    // Direct: the first run goes through the head while the client asks for routes.
    await waitFor('a run sent directly', async () => {
      const f = client.run('mlp', { x });
      await f;
      return f.resolvedHere || undefined;
    });
    const direct = Array.from({ length: 8 }, () => client.run('mlp', { x }));
    assert.ok(
      direct.every((f) => f.resolvedHere),
      'sent to the replica directly',
    );
    for (const f of direct) assertClose((await f).logits!.data as Float32Array, wantLogits, 'direct');

    const viaHead = await connect(cluster.url, { token: TOKEN, tls: { ca: pki.ca }, direct: false, sharedMemory: false });
    try {
      for (let i = 0; i < 4; i++)
        assertClose((await viaHead.run('mlp', { x })).logits!.data as Float32Array, wantLogits, 'through the head');
    } finally {
      await viaHead.close();
    }

    const { body, headers } = mlpBinaryRequest(x.data as Float32Array, 1);
    const answer = await httpsCall('POST', '/v2/models/mlp/infer', body, headers);
    assert.equal(answer.status, 200, answer.body.toString().slice(0, 300));
    const split = splitBinaryAnswer({ status: answer.status, headers: new Headers(answer.headers), body: answer.body, json: undefined });
    assertClose(floatsOf(split.binary), wantLogits, 'HTTPS');

    // By name: the certificate names localhost and 127.0.0.1, and a TLS server name may not be an IP address.
    const grpc = grpcClient(`localhost:${grpcPort}`, undefined, credentials.createSsl(pki.ca));
    try {
      const reply = await grpc.call<{ raw_output_contents: Buffer[] }>(
        'ModelInfer',
        {
          model_name: 'mlp',
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 64] }],
          raw_input_contents: [rawFloats(x.data as Float32Array)],
        },
        { token: TOKEN, deadlineMs: 30_000 },
      );
      assertClose(floatsOfRaw(reply.raw_output_contents[0]!), wantLogits, 'gRPC');
    } finally {
      grpc.close();
    }

    const captured = await capture.stop();
    const input = bytesOf(x);
    const output = bytesOf(want.logits!);
    const secrets: [string, Buffer][] = [
      ['the cluster token', Buffer.from(TOKEN)],
      ["the replica's direct token", Buffer.from(routes.replicas[0]!.token)],
      ['the input tensor (first 32 bytes)', input.subarray(0, 32)],
      ['the input tensor (middle 32 bytes)', input.subarray(112, 144)],
      ['the input tensor (last 32 bytes)', input.subarray(224, 256)],
      ['the output tensor (first 16 bytes)', output.subarray(0, 16)],
    ];
    for (const [what, bytes] of secrets) assert.equal(captured.indexOf(bytes), -1, `${what} crossed loopback in clear`);
    // The capture did see the calls: far more than the marker alone.
    assert.ok(captured.length > 20_000, `the capture holds ${captured.length} bytes`);
  });
});

describe('troupe up with TLS', { timeout: 120_000 }, () => {
  test('brings up a head on https:, an agent that verifies it, and serves the sample inference', async () => {
    const pki = await makeTestPki();
    const cwd = await mkdtemp(join(tmpdir(), 'troupe-up-tls-'));
    const up = spawn(
      process.execPath,
      [CLI, 'up', '--port', '0', '--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-ca', pki.caCert],
      { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv() },
    );
    let stdout = '';
    let stderr = '';
    up.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    up.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => up.once('exit', (code) => resolve(code)));
    try {
      await waitFor('troupe up to say where the cluster is', () => /Troupe is up at https:\/\/127\.0\.0\.1:\d+/.test(stdout), 90_000).catch(
        (err: Error) => {
          throw new Error(`${err.message}\nstdout: ${stdout}\nstderr: ${stderr}`);
        },
      );
      assert.match(stdout, /sample inference: logits float32\[1,10\]/);
      assert.match(stdout, /connect\('wss:\/\/127\.0\.0\.1:\d+', \{ tls: \{ ca \} \}\)/);
      const url = /Troupe is up at (https:\/\/127\.0\.0\.1:\d+)/.exec(stdout)![1]!;
      const plain = await plaintextAnswer(Number(new URL(url).port), 'GET /v2/health/ready HTTP/1.1\r\nhost: x\r\n\r\n');
      assertRefusedPlaintext(plain, "troupe up's head");
    } finally {
      process.kill(-up.pid!, 'SIGTERM');
      assert.equal(await exited, 0, stderr);
      await rm(cwd, { recursive: true, force: true });
      await rm(pki.dir, { recursive: true, force: true });
    }
  });
});
