import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startHead } from '../../head/index.js';
import type { Head } from '../../head/index.js';
import { startCluster, waitFor } from '../helpers/cluster.js';
import type { TestCluster } from '../helpers/cluster.js';
import { assertStatus, grpcClient } from '../helpers/grpc-client.js';
import type { GrpcClient } from '../helpers/grpc-client.js';

/**
 * The gRPC endpoint under the HTTP API's rules: the token (inference needs it on a head that
 * listens beyond loopback; health and metadata are open), and a draining head refusing new
 * inferences with UNAVAILABLE while it finishes what it accepted.
 */

const TOKEN = 'grpc-test-token-0123';

describe('gRPC: the cluster token', { timeout: 60_000 }, () => {
  let cluster: TestCluster;
  let grpc: GrpcClient;
  before(async () => {
    // Beyond loopback (every interface), where inference needs the token; reached on 127.0.0.1.
    cluster = await startCluster({ headArgs: ['--host', '0.0.0.0', '--token', TOKEN], agents: [] });
    grpc = grpcClient(`127.0.0.1:${cluster.grpcAddress.split(':').pop()}`);
  });
  after(async () => {
    grpc?.close();
    await cluster?.stop();
  });

  test('ModelInfer and ModelStreamInfer need `authorization: Bearer <token>`; health and metadata do not', async () => {
    const infer = { model_name: 'nope', inputs: [] };
    await assertStatus(grpc.call('ModelInfer', infer), status.UNAUTHENTICATED, 'TROUPE_ERR_UNAUTHORIZED', /missing cluster token/);
    await assertStatus(
      grpc.call('ModelInfer', infer, { token: 'not-the-token' }),
      status.UNAUTHENTICATED,
      'TROUPE_ERR_UNAUTHORIZED',
      /wrong cluster token/,
    );
    // With the token the call gets past the check, to the model it names.
    await assertStatus(grpc.call('ModelInfer', infer, { token: TOKEN }), status.NOT_FOUND, 'TROUPE_ERR_UNKNOWN_DEPLOYMENT', /'nope'/);

    const stream = grpc.stream();
    const refused = new Promise<{ code: number; details: string }>((resolve) => stream.on('error', resolve));
    stream.on('data', () => assert.fail('a stream without the token answers nothing'));
    stream.write(infer);
    const err = await refused;
    assert.equal(err.code, status.UNAUTHENTICATED);
    assert.match(err.details, /^TROUPE_ERR_UNAUTHORIZED: missing cluster token/);

    const authorized = grpc.stream(TOKEN);
    const answers: { error_message: string }[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      authorized.on('data', (a: { error_message: string }) => answers.push(a));
      authorized.on('end', resolve);
      authorized.on('error', reject);
    });
    authorized.write(infer);
    authorized.end();
    await ended;
    assert.match(answers[0]!.error_message, /^TROUPE_ERR_UNKNOWN_DEPLOYMENT/);

    assert.deepEqual(await grpc.call('ServerLive', {}), { live: true });
    assert.deepEqual(await grpc.call('ServerReady', {}), { ready: false }, 'no node has joined');
    assert.equal((await grpc.call<{ name: string }>('ServerMetadata', {})).name, 'troupe');
  });
});

describe('gRPC: a draining head', { timeout: 60_000 }, () => {
  let dir: string;
  let head: Head;
  let grpc: GrpcClient;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-grpc-drain-'));
    head = await startHead({ port: 0, grpcPort: 0, dataDir: dir, drainMs: 1000, httpWorkers: 0 });
    grpc = grpcClient(head.grpcAddress!);
  });
  after(async () => {
    grpc?.close();
    await head?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('refuses new inferences with UNAVAILABLE and TROUPE_ERR_SHUTTING_DOWN, says it is not ready, and closes', async () => {
    assert.deepEqual(await grpc.call('ServerLive', {}), { live: true }, 'connected before the drain');
    // Accepted and still open when the drain starts: a deploy that waits for a node that never comes.
    const deploy = new Promise<number>((resolve, reject) => {
      const req = request(
        `${head.url}/api/v1/deployments/waits`,
        { method: 'PUT', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.end('{"model": "mlp.onnx"}');
    });
    await waitFor('the deploy to be accepted', () => head.state.deployments.has('waits'));
    const closing = head.close();
    await assertStatus(
      grpc.call('ModelInfer', { model_name: 'waits', inputs: [] }),
      status.UNAVAILABLE,
      'TROUPE_ERR_SHUTTING_DOWN',
      /shutting down and takes no new work/,
    );
    assert.deepEqual(await grpc.call('ServerReady', {}), { ready: false });
    assert.equal(await deploy, 503);
    await closing;
  });
});
